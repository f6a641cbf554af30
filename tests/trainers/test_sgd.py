"""SimpleSGDTrainer: dense and sparse steps, clipping, learning rate."""

import numpy as np
import pytest

import dyn as dy


def _grad_step(m, trainer, loss_fn):
    dy.renew_cg()
    loss = loss_fn()
    loss.backward()
    trainer.update()
    return loss


def test_dense_step_is_sgd():
    m = dy.ParameterCollection()
    p = m.add_parameters((3,), init=np.array([1.0, 2.0, 3.0]))
    t = dy.SimpleSGDTrainer(m, learning_rate=0.1)
    t.set_clip_threshold(-1)  # |g| = 7.5 would be clipped to 5
    _grad_step(m, t, lambda: dy.squared_norm(p))  # g = 2p
    np.testing.assert_allclose(p.as_array(), [0.8, 1.6, 2.4], rtol=1e-6)
    assert not p.grad_as_array().any()  # consumed


def test_sparse_step_touches_only_used_rows():
    m = dy.ParameterCollection()
    E = m.add_lookup_parameters((1000, 4), init=1.0)
    t = dy.SimpleSGDTrainer(m, learning_rate=0.5)
    _grad_step(m, t, lambda: dy.sum_elems(E[7]) + dy.sum_batches(dy.sum_elems(E.batch([3, 7]))))
    a = E.as_array()
    np.testing.assert_allclose(a[7], 0.0, atol=1e-7)  # 1 - 0.5 * 2
    np.testing.assert_allclose(a[3], 0.5)
    assert np.all(np.delete(a, [3, 7], axis=0) == 1.0)
    assert len(E.touched_rows()) == 0 and not E.grad_as_array().any()


def test_dense_mode_and_whole_table_use_give_same_result():
    results = []
    for sparse in (True, False):
        m = dy.ParameterCollection()
        E = m.add_lookup_parameters((5, 2), init=np.arange(10.0).reshape(5, 2))
        t = dy.SimpleSGDTrainer(m, learning_rate=0.1)
        t.set_sparse_updates(sparse)
        _grad_step(m, t, lambda: dy.squared_norm(E[1]) + dy.sum_elems(dy.parameter(E)))
        results.append(E.as_array())
    np.testing.assert_allclose(results[0], results[1])


def test_clipping_default_threshold_5():
    m = dy.ParameterCollection()
    p = m.add_parameters((2,), init=0.0)
    t = dy.SimpleSGDTrainer(m, learning_rate=1.0)
    assert t.get_clip_threshold() == 5.0
    x = dy.inputVector([30.0, 40.0])
    _grad_step(m, t, lambda: dy.dot_product(p, dy.inputVector([30.0, 40.0])))  # |g| = 50 -> 5
    np.testing.assert_allclose(p.as_array(), [-3.0, -4.0], rtol=1e-6)
    t.set_clip_threshold(-1)
    _grad_step(m, t, lambda: dy.dot_product(p, dy.inputVector([30.0, 40.0])))
    np.testing.assert_allclose(p.as_array(), [-33.0, -44.0], rtol=1e-6)
    del x


def test_learning_rate_settable_and_nan_named():
    m = dy.ParameterCollection()
    p = m.add_parameters((1,), init=1.0, name="w")
    t = dy.SimpleSGDTrainer(m)
    assert t.learning_rate == 0.1
    t.learning_rate = 0.5
    _grad_step(m, t, lambda: dy.sum_elems(p))
    np.testing.assert_allclose(p.as_array(), [0.5])
    dy.renew_cg()
    dy.sum_elems(dy.cdiv(p, dy.inputVector([0.0]))).backward()
    with pytest.raises(RuntimeError, match="/w"):
        t.update()


def test_not_updated_parameter_stays():
    m = dy.ParameterCollection()
    p = m.add_parameters((2,), init=1.0)
    p.set_updated(False)
    t = dy.SimpleSGDTrainer(m)
    _grad_step(m, t, lambda: dy.sum_elems(p))
    np.testing.assert_array_equal(p.as_array(), [1.0, 1.0])


def test_parameters_added_after_trainer_are_trained():
    m = dy.ParameterCollection()
    t = dy.SimpleSGDTrainer(m, learning_rate=1.0)
    p = m.add_parameters((1,), init=1.0)
    _grad_step(m, t, lambda: dy.sum_elems(p))
    np.testing.assert_allclose(p.as_array(), [0.0], atol=1e-7)


def test_linear_regression_learns():
    rng = np.random.RandomState(0)
    w_true = np.array([2.0, -3.0, 0.5])
    X = rng.randn(200, 3)
    Y = X @ w_true + 1.0
    m = dy.ParameterCollection()
    W = m.add_parameters((1, 3), init=0.0)
    b = m.add_parameters((1,), init=0.0)
    t = dy.SimpleSGDTrainer(m, learning_rate=0.05)
    for _ in range(5):
        for x, y in zip(X, Y):
            dy.renew_cg()
            loss = dy.squared_distance(W * dy.inputVector(x) + b, dy.inputVector([y]))
            loss.backward()
            t.update()
    np.testing.assert_allclose(W.as_array().ravel(), w_true, atol=1e-3)
    np.testing.assert_allclose(b.as_array(), [1.0], atol=1e-3)
