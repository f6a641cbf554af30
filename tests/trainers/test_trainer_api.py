"""Trainer methods and attributes: clipping, NaN/Inf, update_subset, restart,
status, lazy state growth, weight decay (lazy scale = eager multiply),
state_dict round trips."""

import numpy as np
import pytest

import dyn as dy
from dyn import _config


def _model(rng=None):
    rng = rng or np.random.RandomState(0)
    m = dy.ParameterCollection()
    W = m.add_parameters((2, 3), init=rng.randn(2, 3), name="w")
    E = m.add_lookup_parameters((50, 3), init=rng.randn(50, 3), name="e")
    return m, W, E


def _step(t, W, E, rows, x, scale=1.0):
    dy.renew_cg()
    h = dy.esum([E[int(r)] for r in rows])
    loss = dy.squared_norm(W * h - dy.inputVector(list(x))) * scale
    loss.backward()
    t.update()


def test_clipping_uses_the_global_norm_of_dense_and_sparse_gradients(float64):
    m = dy.ParameterCollection()
    p = m.add_parameters((1,), init=0.0)
    E = m.add_lookup_parameters((1000, 1), init=0.0)
    t = dy.SimpleSGDTrainer(m, learning_rate=1.0)
    dy.renew_cg()
    (dy.sum_elems(p) * 3.0 + dy.sum_elems(E[7]) * 4.0 + dy.sum_elems(E[9]) * 12.0).backward()
    t.update()  # |g| = 13 > 5: scaled by 5/13
    np.testing.assert_allclose(p.as_array(), [-15 / 13])
    np.testing.assert_allclose(E.as_array()[[7, 9], 0], [-20 / 13, -60 / 13])
    assert t.clips == 1
    t.set_clip_threshold(20.0)
    assert t.get_clip_threshold() == 20.0
    t.set_clip_threshold(0)
    assert t.get_clip_threshold() == 0.0 and not t.clipping_enabled


@pytest.mark.parametrize("n", [1, 7, 1003])
def test_float32_gradient_norm_sums_in_double(n):
    """A float32 gradient's squared norm is summed in double: 4096^2 + n ones is 2^24 + n, which a
    float32 sum would round back to 2^24. Odd lengths reach the vector loop's tail; the lookup
    table's touched rows go through the same sum."""
    m = dy.ParameterCollection()
    W = m.add_parameters((n + 1,), init=0.0)
    E = m.add_lookup_parameters((10, n + 1), init=0.0)
    t = dy.SimpleSGDTrainer(m, learning_rate=1.0)
    t.set_clip_threshold(1e9)
    t.set_grad_norm_history(True)
    x = [4096.0] + [1.0] * n
    dy.renew_cg()
    (dy.dot_product(W, dy.inputVector(x)) + dy.dot_product(E[3], dy.inputVector(x))).backward()
    t.update()
    assert t.grad_norm_history()[-1] ** 2 == pytest.approx(2 * (2.0**24 + n), rel=1e-13)


@pytest.mark.parametrize("where", ["dense", "lookup"])
def test_nan_or_inf_gradient_names_the_parameter(where):
    m, W, E = _model()
    t = dy.AdamTrainer(m)
    before = (W.as_array(), E.as_array())
    dy.renew_cg()
    target = E[4] if where == "lookup" else dy.reshape(W, (6,))
    zero = dy.inputVector([0.0] * (3 if where == "lookup" else 6))
    (dy.sum_elems(W * E[3]) + dy.sum_elems(dy.cdiv(target, zero))).backward()  # gradient 1/0
    with pytest.raises(RuntimeError, match="/e" if where == "lookup" else "/w"):
        t.update()
    np.testing.assert_array_equal(W.as_array(), before[0])  # nothing moved
    np.testing.assert_array_equal(E.as_array(), before[1])


def test_update_subset_really_updates_the_subset(float64):
    m, W, E = _model()
    V = m.add_parameters((2,), init=1.0, name="v")
    t = dy.MomentumSGDTrainer(m, learning_rate=0.1)
    dy.renew_cg()
    (dy.sum_elems(W) + dy.sum_elems(V) + dy.sum_elems(E[1])).backward()
    w0, e0, v0 = W.as_array(), E.as_array(), V.as_array()
    t.update_subset([1], [])  # V only (index into parameters_list())
    np.testing.assert_array_equal(W.as_array(), w0)
    np.testing.assert_array_equal(E.as_array(), e0)
    np.testing.assert_allclose(V.as_array(), v0 - 0.1)
    assert W.grad_as_array().any() and E.grad_as_array().any()  # kept for later
    assert not V.grad_as_array().any()
    t.update_subset([W], [E])  # objects work too
    np.testing.assert_allclose(W.as_array(), w0 - 0.1)
    np.testing.assert_allclose(E.as_array()[1], e0[1] - 0.1)
    np.testing.assert_array_equal(V.as_array(), v0 - 0.1)  # its momentum waits for its next step
    assert t.updates == 2
    with pytest.raises(IndexError):
        t.update_subset([7], [])
    with pytest.raises(ValueError):
        t.update_subset([dy.ParameterCollection().add_parameters(1)], [])


def test_restart_zeroes_state_and_sets_rate(float64):
    m = dy.ParameterCollection()
    p = m.add_parameters((1,), init=0.0)
    t = dy.MomentumSGDTrainer(m, learning_rate=1.0, mom=0.5)
    for _ in range(2):
        dy.renew_cg()
        dy.sum_elems(p).backward()
        t.update()
    np.testing.assert_allclose(p.as_array(), [-1 - 1.5])
    t.restart(0.5)
    assert t.learning_rate == 0.5
    dy.renew_cg()
    dy.sum_elems(p).backward()
    t.update()
    np.testing.assert_allclose(p.as_array(), [-2.5 - 0.5])  # no momentum left


def test_status_learning_rate_and_epoch(capsys):
    m, W, E = _model()
    t = dy.SimpleSGDTrainer(m, learning_rate=0.25)
    _step(t, W, E, [1], [100.0, 100.0])  # clipped
    _step(t, W, E, [2], [0.0, 0.0], scale=0.0)
    t.status()
    assert capsys.readouterr().err == "[lr=0.25 clips=1 updates=2] "
    t.status()
    assert capsys.readouterr().err == "[lr=0.25 clips=0 updates=0] "
    t.learning_rate *= 2
    t.set_learning_rate(t.learning_rate + 0.5)
    assert t.learning_rate == 1.0
    t.update_epoch(1.0)
    assert "deprecated" in capsys.readouterr().err
    assert t.get_sparse_updates()
    t.set_sparse_updates(False)
    assert not t.get_sparse_updates()


def test_parameters_added_later_get_state_lazily(float64):
    """A parameter added after k updates starts with zero moments; Adam's
    bias correction counts the trainer's updates (DyNet)."""
    m = dy.ParameterCollection()
    p = m.add_parameters((1,), init=0.0)
    t = dy.AdamTrainer(m, alpha=0.1)
    for _ in range(3):
        dy.renew_cg()
        dy.sum_elems(p).backward()
        t.update()
    q = m.add_parameters((1,), init=0.0)
    E = m.add_lookup_parameters((4, 1), init=0.0)
    dy.renew_cg()
    (dy.sum_elems(q) + dy.sum_elems(E[2])).backward()
    t.update()
    m1, v1 = 0.1, 0.001  # first moments of a gradient of 1 at update t=4
    want = -0.1 * np.sqrt(1 - 0.999**4) / (1 - 0.9**4) * m1 / (np.sqrt(v1) + 1e-8)
    np.testing.assert_allclose(q.as_array(), [want], rtol=1e-10)
    np.testing.assert_allclose(E.as_array()[2], [want], rtol=1e-10)


def test_weight_decay_lazy_scale_equals_eager_multiply(float64):
    """(1 - wd) after every update: lazy on idle lookup rows, eager on dense
    parameters; equal to multiplying everything after every step."""
    rng = np.random.RandomState(1)
    m, W, E = _model(rng)
    m.set_weight_decay(0.1)
    assert m.get_weight_decay() == 0.1
    t = dy.SimpleSGDTrainer(m, learning_rate=0.05)
    t.set_clip_threshold(-1)
    w, e = W.as_array(), E.as_array()
    for _ in range(30):
        rows, x = rng.choice(50, 2, replace=False), rng.randn(2)
        dy.renew_cg()
        h = E[int(rows[0])] + E[int(rows[1])]
        gh = 2 * (w @ (e[rows[0]] + e[rows[1]]) - x)
        gw, ge = np.outer(gh, e[rows[0]] + e[rows[1]]), w.T @ gh
        dy.squared_norm(W * h - dy.inputVector(list(x))).backward()
        t.update()
        w = (w - 0.05 * gw) * 0.9
        e[rows] -= 0.05 * ge
        e *= 0.9
    np.testing.assert_allclose(W.as_array(), w, rtol=1e-10)
    np.testing.assert_allclose(E.as_array(), e, rtol=1e-10)
    assert 0.9**30 < 0.05  # the scale went far below DyNet's 0.25 rescale point


def test_weight_decay_flag_is_the_default(float64):
    saved = _config.state["weight_decay"]
    try:
        dy.init(weight_decay=0.5)
        m = dy.ParameterCollection()
        p = m.add_parameters((1,), init=1.0)
        t = dy.SimpleSGDTrainer(m)
        dy.renew_cg()
        (dy.sum_elems(p) * 0.0).backward()
        t.update()
        np.testing.assert_allclose(p.as_array(), [0.5])
        m.set_weight_decay(0.25)
        t.update()
        np.testing.assert_allclose(p.as_array(), [0.375])
    finally:
        _config.state["weight_decay"] = saved


def test_two_trainers_on_subcollections():
    m = dy.ParameterCollection()
    a, b = m.add_subcollection("a"), m.add_subcollection("b")
    pa, pb = a.add_parameters((1,), init=1.0), b.add_parameters((1,), init=1.0)
    ta, tb = dy.SimpleSGDTrainer(a, 1.0), dy.AdamTrainer(b, 0.1)
    dy.renew_cg()
    (dy.sum_elems(pa) + dy.sum_elems(pb)).backward()
    ta.update()
    assert pa.as_array()[0] == 0.0 and pb.as_array()[0] == 1.0
    tb.update()
    assert pb.as_array()[0] < 1.0


@pytest.mark.parametrize(
    "name", ["AdamTrainer", "MomentumSGDTrainer", "SMORMS3Trainer", "CyclicalSGDTrainer"]
)
def test_state_dict_resumes_exactly(float64, name):
    """Train 20 steps, snapshot values + trainer state, train 20 more; a fresh
    model + trainer loaded from the snapshot ends in the same place."""
    rng = np.random.RandomState(2)
    data = [(rng.choice(50, 2), rng.randn(2)) for _ in range(40)]
    m, W, E = _model()
    t = getattr(dy, name)(m)
    m.set_weight_decay(0.01)
    for rows, x in data[:20]:
        _step(t, W, E, rows, x)
    state = t.state_dict()
    assert all(isinstance(v, np.ndarray) for v in state.values())
    assert "/e#last" in state and "#updates" in state
    snap = (W.as_array(), E.as_array())
    for rows, x in data[20:]:
        _step(t, W, E, rows, x)
    m2, W2, E2 = _model()
    m2.set_weight_decay(0.01)
    W2.set_value(snap[0])
    E2.set_value(snap[1])
    t2 = getattr(dy, name)(m2)
    t2.load_state_dict(state)
    assert t2.updates == 20
    for rows, x in data[20:]:
        _step(t2, W2, E2, rows, x)
    np.testing.assert_allclose(W2.as_array(), W.as_array(), rtol=1e-12)
    np.testing.assert_allclose(E2.as_array(), E.as_array(), rtol=1e-12)


def test_load_state_dict_checks_before_changing_anything():
    m, W, E = _model()
    t = dy.AdamTrainer(m)
    _step(t, W, E, [1, 2], [1.0, 2.0])
    good = t.state_dict()
    t2 = dy.AdamTrainer(_model()[0])
    for bad in (
        dict(good, **{"/e#m": np.zeros(7)}),  # wrong shape
        dict(good, **{"/nope#m": np.zeros(6)}),  # no such parameter
        dict(good, **{"/w#q": np.zeros(6)}),  # no such state
        {k: v for k, v in good.items() if k != "#updates"},
    ):
        with pytest.raises(ValueError):
            t2.load_state_dict(bad)
        assert t2.updates == 0 and not t2.state_dict().get("/w#m", np.zeros(1)).any()


def test_weight_decay_flag_is_the_collections_default():
    from dyn import _config

    old = _config.state["weight_decay"]
    try:
        dy.init(weight_decay=0.25)
        m = dy.ParameterCollection()
        assert m.get_weight_decay() == 0.25
        m.set_weight_decay(0.0)  # a collection can switch the flag's decay off
        assert m.get_weight_decay() == 0.0
    finally:
        _config.state["weight_decay"] = old
