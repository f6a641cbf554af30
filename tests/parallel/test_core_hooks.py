"""The three small core methods dyn.parallel needs: Pool.adopt (move a pool into
given buffers), ParamExpr.set_touched, PState.adopt_arrays."""

import numpy as np
import pytest

import dyn as dy
from tests.parallel._helpers import Model, make_data


def test_pool_adopt_moves_values_and_live_nodes():
    model = Model()
    pool = model.W1.pool
    dy.renew_cg()
    x = model.loss(make_data(2))  # nodes of this graph point into the pool
    before = x.value()
    values = np.zeros(len(pool.values) + 64, pool.values.dtype)
    grads = np.zeros_like(values)
    w1, w2 = model.W1.as_array().copy(), model.W2.as_array().copy()
    pool.adopt(values, grads)
    assert pool.values is values and pool.grads is grads
    np.testing.assert_array_equal(model.W1.as_array(), w1)
    values[model.W2.off : model.W2.off + model.W2.size] *= 0.5  # the parameters live in the new buffer
    np.testing.assert_allclose(model.W2.as_array(), 0.5 * w2)
    x.backward()  # the graph made before adopt writes its gradients into the new buffer
    assert np.abs(grads[model.W1.off : model.W1.off + model.W1.size]).sum() > 0
    dy.renew_cg()
    assert model.loss(make_data(2)).value() != before


def test_pool_adopt_rejects_bad_buffers():
    pool = Model().W1.pool
    n = len(pool.values)
    with pytest.raises(ValueError, match="Pool.adopt: values"):
        pool.adopt(np.zeros(n - 1, pool.values.dtype), np.zeros(n, pool.values.dtype))
    with pytest.raises(ValueError, match="Pool.adopt: grads"):
        pool.adopt(np.zeros(n, pool.values.dtype), np.zeros(n, np.int32))
    both = np.zeros(n, pool.values.dtype)
    with pytest.raises(ValueError, match="overlap"):
        pool.adopt(both, both)


def test_set_touched_replaces_the_touched_set():
    E = Model().E
    E.set_touched([5, 2, 7])
    assert E.touched_rows().tolist() == [5, 2, 7]
    E.set_touched(np.array([1]))
    assert E.touched_rows().tolist() == [1]
    with pytest.raises(IndexError, match="set_touched"):
        E.set_touched([len(E)])
    with pytest.raises(ValueError, match="twice"):
        E.set_touched([3, 3])
    assert E.touched_rows().tolist() == []


def test_pstate_adopt_arrays_keeps_training_in_the_new_arrays():
    model = Model()
    trainer = dy.MomentumSGDTrainer(model.m, 0.1)
    s = trainer._state(model.W1)
    shared = [np.zeros_like(a) for a in s.arrays]
    dy.renew_cg()
    model.loss(make_data(3)).backward()
    trainer.update()
    v = s.arrays[0].copy()
    s.adopt_arrays(shared)
    np.testing.assert_array_equal(shared[0], v)
    dy.renew_cg()
    model.loss(make_data(3)).backward()
    trainer.update()
    assert s.arrays[0] is shared[0] and not np.array_equal(shared[0], v)
    with pytest.raises(ValueError, match="adopt_arrays"):
        s.adopt_arrays([np.zeros(3, shared[0].dtype)])
