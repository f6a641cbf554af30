"""Graph mechanics: laziness, versions, backward rules, arenas, debugging modes."""

import numpy as np
import pytest

import dyn as dy
from dyn._core.core import graph as _graph


def test_stale_expression_raises():
    x = dy.inputVector([1.0, 2.0])
    dy.renew_cg()
    with pytest.raises(RuntimeError, match="Stale"):
        x.value()
    with pytest.raises(RuntimeError, match="Stale"):
        x.dim()
    y = dy.inputVector([1.0, 2.0])
    with pytest.raises(ValueError, match="stale"):
        dy.cmult(y, x)
    with pytest.raises(ValueError, match="stale"):
        dy.cmult(x, y)  # stricter than DyNet: the first argument is checked too
    with pytest.raises(ValueError, match="stale"):
        dy.esum([y, x])
    assert y.vec_value() == [1.0, 2.0]  # the failed calls left the graph usable


def test_lazy_and_incremental_forward():
    x = dy.inputVector([1.0, -2.0])
    y = x * 3.0
    assert _graph.memory_stats()["forward_used"] == 0  # nothing computed yet
    assert y.vec_value() == [3.0, -6.0]
    used = _graph.memory_stats()["forward_used"]
    z = y + 1.0
    assert z.vec_value() == [4.0, -5.0]
    assert _graph.memory_stats()["forward_used"] > used  # only z was added
    assert y.vec_value() == [3.0, -6.0]


def test_input_set_invalidates():
    x = dy.scalarInput(2.0)
    y = x * x if False else dy.cmult(x, x)
    assert y.scalar_value() == 4.0
    x.set(3.0)
    assert y.scalar_value() == 9.0
    v = dy.vecInput(2)
    w = v * 2.0
    v.set([1.0, 5.0])
    assert w.vec_value() == [2.0, 10.0]


def test_value_shapes_follow_dynet():
    s = dy.scalarInput(1.5)
    assert s.value() == 1.5 and s.npvalue().shape == (1,) and s.dim() == ((1,), 1)
    v = dy.inputVector([1, 2, 3])
    assert v.value() == [1.0, 2.0, 3.0] and v.dim() == ((3,), 1)
    m = dy.inputTensor(np.arange(6.0).reshape(2, 3))
    assert m.value().shape == (2, 3) and m.dim() == ((2, 3), 1)
    np.testing.assert_array_equal(m.npvalue(), np.arange(6.0).reshape(2, 3))
    assert m.vec_value() == list(np.arange(6.0).reshape(2, 3).ravel(order="F"))
    b = dy.inputTensor(np.arange(6.0).reshape(2, 3), batched=True)
    assert b.dim() == ((2,), 3) and b.npvalue().shape == (2, 3)
    lb = dy.inputTensor([np.ones(2), np.zeros(2)])
    assert lb.dim() == ((2,), 2)
    assert dy.zeros((2, 2), batch_size=4).dim() == ((2, 2), 4)
    assert dy.constant(3, 0.5).vec_value() == [0.5, 0.5, 0.5]
    assert dy.ones(2).tensor_value().as_numpy().tolist() == [1.0, 1.0]
    assert repr(s).startswith("expression ")


def test_backward_needs_scalar_and_gradient_rules():
    m = dy.ParameterCollection()
    p = m.add_parameters((3,), init=1.0)
    x = dy.inputVector([1.0, 2.0, 3.0])
    y = dy.cmult(p, x)
    with pytest.raises(ValueError, match="scalar"):
        y.backward()
    with pytest.raises(RuntimeError):
        y.gradient()  # no backward yet
    loss = dy.sum_elems(y)
    loss.backward()
    np.testing.assert_allclose(p.grad_as_array(), [1.0, 2.0, 3.0])
    np.testing.assert_allclose(x.gradient(), 0.0)  # constant: no gradient without full=True
    loss.backward(full=True)
    np.testing.assert_allclose(x.gradient(), [1.0, 1.0, 1.0])
    np.testing.assert_allclose(p.grad_as_array(), [2.0, 4.0, 6.0])  # parameters accumulate
    later = loss * 2.0
    with pytest.raises(RuntimeError):
        later.gradient()  # created after the backward start node


def test_batched_loss_must_be_summed():
    x = dy.inputTensor(np.ones((2, 4)), batched=True)
    loss = dy.sum_elems(x)
    with pytest.raises(ValueError, match="sum_batches"):
        loss.backward()
    dy.sum_batches(loss).backward(full=True)
    np.testing.assert_allclose(x.gradient(), np.ones((2, 4)))


def test_immediate_compute_and_check_validity():
    dy.renew_cg(immediate_compute=True, check_validity=True)
    x = dy.inputVector([1.0, 0.0])
    used = _graph.memory_stats()["forward_used"]
    y = x * 2.0
    assert _graph.memory_stats()["forward_used"] > used  # computed at creation
    with pytest.raises(RuntimeError, match=r"NaN or Inf.*node 2 \(cdiv, dim \{2\}\)"):
        dy.cdiv(y, x)  # 0/0 -> the node that made it is named
    dy.renew_cg()
    dy.cdiv(y if False else dy.inputVector([1.0]), dy.inputVector([0.0]))  # no check: no error


def test_arena_grows_by_itself_and_merges():
    _graph.set_initial_memory(4096)
    x = dy.inputTensor(np.ones((100, 100)))
    ys = [x * float(i) for i in range(20)]  # 20 x 40 kB >> 4 kB
    total = dy.esum(ys)
    assert total.npvalue()[0, 0] == sum(range(20))
    st = _graph.memory_stats()
    assert st["forward_blocks"] > 1
    dy.renew_cg()
    st2 = _graph.memory_stats()
    assert st2["forward_blocks"] == 1 and st2["forward_capacity"] >= st["forward_used"]
    x = dy.inputTensor(np.ones((100, 100)))
    dy.esum([x * float(i) for i in range(20)]).forward()
    assert _graph.memory_stats()["forward_blocks"] == 1  # the merged block was big enough


def test_merged_and_reserved_blocks_have_room_where_memory_is_lazy(device):
    """On the CPU (memory backed on first write) the block that replaces a chain is four times
    the high-water mark, and the gradient arena's new block four times the reservation, so a
    graph twice as large as the last fits without replacing (and faulting in) the arenas again;
    on a GPU (stand-in here) the blocks are a quarter larger, as device memory is taken whole."""
    lazy = device == "CPU"
    _graph.set_initial_memory(4096)
    try:
        m = dy.ParameterCollection()
        p = m.add_parameters((100, 100))

        def run(n):
            dy.renew_cg()
            w, x = dy.parameter(p), dy.inputTensor(np.ones((100, 100)))
            loss = dy.sum_elems(dy.esum([w * x * float(i) for i in range(n)]))
            loss.backward()
            return _graph.memory_stats()

        st = run(20)
        assert st["forward_blocks"] > 1
        dy.renew_cg()
        merged = _graph.memory_stats()
        assert merged["forward_blocks"] == 1
        assert merged["forward_capacity"] == (4 * st["forward_used"] if lazy
                                              else st["forward_used"] + st["forward_used"] // 4)
        st2 = run(40)
        if lazy:
            assert st2["forward_blocks"] == 1 and st2["forward_capacity"] == merged["forward_capacity"]
            assert st2["backward_capacity"] == st["backward_capacity"]
        else:
            assert st2["forward_blocks"] > 1 and st2["backward_capacity"] > st["backward_capacity"]
    finally:
        _graph.set_initial_memory(1 << 20)
        dy.renew_cg()


def test_cg_api():
    v = dy.cg_version()
    dy.renew_cg()
    assert dy.cg_version() == v + 1
    with pytest.raises(RuntimeError):
        dy.ComputationGraph()
    assert dy.cg() is dy.cg()
    a, b = dy.scalarInput(1.0), dy.scalarInput(2.0)
    s = a + b
    dy.forward([s, a])
    assert dy.values([s, b]) == [3.0, 2.0]


def test_operators_with_numbers():
    x = dy.inputVector([1.0, 2.0])
    assert (x + 1).vec_value() == [2.0, 3.0]
    assert (1 + x).vec_value() == [2.0, 3.0]
    assert (x - 1).vec_value() == [0.0, 1.0]
    assert (1 - x).vec_value() == [0.0, -1.0]
    assert (x * 2).vec_value() == [2.0, 4.0]
    assert (2 * x).vec_value() == [2.0, 4.0]
    assert (x / 2).vec_value() == [0.5, 1.0]
    assert (-x).vec_value() == [-1.0, -2.0]
    with pytest.raises(NotImplementedError, match="cdiv"):
        x / x
    with pytest.raises(TypeError):
        x + "a"


def test_bad_shapes_name_op_and_dims():
    a = dy.inputTensor(np.ones((2, 3)))
    b = dy.inputTensor(np.ones((4, 5)))
    with pytest.raises(ValueError, match=r"matrix product.*\{2,3\}.*\{4,5\}"):
        a * b
    with pytest.raises(ValueError, match=r"add.*\{2,3\}.*\{4,5\}"):
        a + b
    with pytest.raises(ValueError, match="affine_transform"):
        dy.affine_transform([a, b])
    with pytest.raises(TypeError):
        dy.esum((a, a))
    with pytest.raises(ValueError, match="empty"):
        dy.esum([])
    with pytest.raises(ValueError, match="batch"):
        dy.inputTensor(np.ones((2, 3)), batched=True) + dy.inputTensor(np.ones((2, 4)), batched=True)
    with pytest.raises(TypeError):
        dy.cmult(a, np.ones((2, 3)))
    assert (a + a).dim() == ((2, 3), 1)  # graph intact after the errors


def test_float64_precision(float64):
    x = dy.inputVector([1.0 / 3.0])
    assert x.scalar_value() == 1.0 / 3.0
    m = dy.ParameterCollection()
    p = m.add_parameters((1,), init=0.1)
    assert p.as_array().dtype == np.float64
    dy.set_precision("float32")
    with pytest.raises(TypeError, match="float64"):
        p * 2.0  # a float64 parameter in a float32 graph
    dy.set_precision("float64")


def test_revert_drops_cached_parameter_nodes():
    m = dy.ParameterCollection()
    W = m.add_parameters((2, 3), init=1.0)
    x = dy.inputVector([1.0, 2.0, 3.0])
    dy.cg_checkpoint()
    y = W * x  # W's node is created after the checkpoint
    assert y.vec_value() == [6.0, 6.0]
    dy.cg_revert()  # drops W's node
    z = dy.inputVector([1.0, 1.0])  # takes the dropped node's id
    y2 = W * x  # W must get a new node, not the reverted id (now z)
    assert y2.vec_value() == [6.0, 6.0] and z.vec_value() == [1.0, 1.0]


def _stale_uses():
    """Ways to use a stale expression x: (what, call of x and a fresh expression y)."""
    m = dy.ParameterCollection()
    E = m.add_lookup_parameters((4, 2))
    return [
        ("value", lambda x, y: x.value()),
        ("npvalue", lambda x, y: x.npvalue()),
        ("dim", lambda x, y: x.dim()),
        ("backward", lambda x, y: dy.sum_elems(x).backward()),
        ("cmult argument", lambda x, y: dy.cmult(y, x)),
        ("Python op argument", lambda x, y: dy.pick_range(x, 0, 1)),
        ("list argument", lambda x, y: dy.esum([y, x])),
        ("lookup argument", lambda x, y: dy.cmult(E[0], x)),
    ]


def test_stale_expression_error_is_both_value_and_runtime_error():
    assert issubclass(dy.StaleExpressionError, ValueError)
    assert issubclass(dy.StaleExpressionError, RuntimeError)
    from dyn.errors import StaleExpressionError

    assert StaleExpressionError is dy.StaleExpressionError
    # what DyNet programs catch keeps catching it
    for cls in (ValueError, RuntimeError):
        with pytest.raises(cls):
            raise dy.StaleExpressionError("Attempt to use a stale expression")


@pytest.mark.parametrize("what", [u[0] for u in _stale_uses()])
def test_stale_expression_is_one_class_everywhere(what):
    use = dict(_stale_uses())[what]
    x = dy.inputVector([1.0, 2.0])
    dy.renew_cg()
    y = dy.inputVector([3.0, 4.0])
    with pytest.raises(dy.StaleExpressionError, match="(?i)stale") as info:
        use(x, y)
    assert "renew_cg" in str(info.value)
    assert y.vec_value() == [3.0, 4.0]


def test_reverted_expression_is_stale_too():
    a = dy.inputVector([1.0, 2.0])
    dy.cg_checkpoint()
    b = dy.inputVector([3.0, 4.0])
    dy.cg_revert()
    assert not b.is_alive()
    with pytest.raises(dy.StaleExpressionError, match="cg_revert"):
        b.value()
    with pytest.raises(dy.StaleExpressionError, match="cg_revert"):
        dy.cmult(a, b)
    assert a.vec_value() == [1.0, 2.0]
