"""The tree nodes' weight gradients of a parameter are queued and done at the end of backward,
one matrix product per weight for the whole graph (instead of one per tree level, or per group of
nodes): the gradients must equal those of the products done where the nodes ran, with automatic
batching on and off, for every tree builder, and the queue must really be used (or not, where the
weight is not a parameter). The queue is the CPU kernels'; on the GPU the products run where the
nodes do and the queue stays empty."""

import numpy as np
import pytest

import dyn as dy
from dyn._core.cpu import treelstm as _tl
from dyn._core.ops import treelstm as _k

D, H, V = 4, 3, 9

BUILDERS = {
    "nary": lambda m: dy.NaryTreeLSTMBuilder(2, 1, D, H, m),
    "nary-2layers": lambda m: dy.NaryTreeLSTMBuilder(2, 2, D, H, m),
    "nary-cell": lambda m: dy.NaryTreeLSTMBuilder(2, 1, D, H, m, cell_terms=True),
    "child_sum": lambda m: dy.ChildSumTreeLSTMBuilder(1, D, H, m),
    "rnn": lambda m: dy.TreeRNNBuilder(2, H, m, input_dim=D),
}


def _check_queue(device, last):
    """On the CPU, products were queued and fewer were run; on the GPU none were queued."""
    queued, products = last
    if device == "CPU":
        assert queued > products >= 1, last
    else:
        assert last == (0, 0)


def _tree(rng, n):
    """A random binary tree over n leaves (nested pairs of word ids)."""
    if n == 1:
        return int(rng.randint(V))
    k = int(rng.randint(1, n))
    return (_tree(rng, k), _tree(rng, n - k))


def _run(name, deferred, autobatch, trees=(7, 3, 12), backward_twice=False):
    """Gradients of every parameter after one graph over the trees; and _last_flush()."""
    _tl._set_deferred(deferred)
    try:
        m = dy.ParameterCollection()
        E = m.add_lookup_parameters((V, D), init=np.random.RandomState(0).randn(V, D))
        b = BUILDERS[name](m)
        rs = np.random.RandomState(1)
        for p in m.parameters_list():
            p.set_value(rs.uniform(-0.6, 0.6, size=p.shape()))
        dy.renew_cg(autobatching=autobatch)
        rng = np.random.RandomState(2)

        def enc(t):
            if isinstance(t, int):
                return b.add_input(E[t])
            return b.compose([enc(t[0]), enc(t[1])])

        r = dy.inputTensor(rng.randn(H))
        loss = dy.esum([dy.dot_product(enc(_tree(rng, n)).output(), r) for n in trees])
        loss.value()
        loss.backward()
        if backward_twice:
            loss.backward()
        grads = [p.grad_as_array().copy() for p in m.parameters_list()]
        grads.append(E.grad_as_array().copy())
        return grads, _tl._last_flush(), loss
    finally:
        _tl._set_deferred(True)


@pytest.mark.parametrize("autobatch", [False, True], ids=["plain", "autobatch"])
@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_deferred_equals_immediate(name, autobatch, float64, device):
    want, (q0, _), _ = _run(name, False, autobatch)
    got, last, _ = _run(name, True, autobatch)
    assert q0 == 0
    # every weight's products of the graph in one product per weight and part (the child-sum
    # cell's forget rows are a second one)
    _check_queue(device, last)
    for k, (g, w) in enumerate(zip(got, want)):
        assert np.abs(w).max() > 0, k
        np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-13, err_msg="parameter %d" % k)


@pytest.mark.parametrize("name", ["nary", "child_sum"])
def test_deferred_gradients_are_the_numeric_ones(name, float64, device):
    _, last, loss = _run(name, True, True, trees=(5, 2))
    _check_queue(device, last)
    assert dy.check_grad(loss) == []


def test_second_backward_adds_the_same_again(float64, device):
    once = _run("nary", True, True)[0]
    twice, last, _ = _run("nary", True, True, backward_twice=True)
    _check_queue(device, last)               # the second pass queued its own products
    for g1, g2 in zip(once, twice):
        np.testing.assert_allclose(g2, 2 * g1, rtol=1e-12, atol=1e-13)


def test_float32_deferred_equals_immediate():
    want = _run("nary", False, True)[0]
    got = _run("nary", True, True)[0]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("autobatch", [False, True], ids=["plain", "autobatch"])
def test_weights_that_are_not_parameters_are_not_deferred(autobatch, float64):
    """A computed weight's gradient is read by its own backward, before the pass ends: its
    products are done where the nodes run, and the gradients still check."""
    rng = np.random.RandomState(4)
    dy.renew_cg(autobatching=autobatch)
    Wx0, U0 = dy.inputTensor(rng.randn(5 * H, D)), dy.inputTensor(rng.randn(5 * H, 2 * H))
    b0 = dy.inputTensor(rng.randn(5 * H))
    Wx, U = _k.tree_weights(Wx0 * 0.5), _k.tree_weights(dy.tanh(U0))
    xs = [dy.inputTensor(rng.randn(D)) for _ in range(4)]
    leaves = [dy.nary_tree_lstm(x, Wx, U, b0) for x in xs]
    mid = [dy.nary_tree_lstm(None, Wx, U, b0, leaves[0], leaves[1]),
           dy.nary_tree_lstm(None, Wx, U, b0, leaves[2], leaves[3])]
    root = dy.nary_tree_lstm(None, Wx, U, b0, *mid)
    loss = dy.sum_elems(dy.cmult(root, root))
    loss.value()
    loss.backward()
    assert _tl._last_flush() == (0, 0)
    assert dy.check_grad(loss) == []


def test_parameters_passed_without_tree_weights_are_deferred(float64, device):
    """Parameters given straight to the tree nodes (no tree_weights alias), one tree a graph
    level by level through the engine: the same gradients as the immediate products."""
    out = []
    for deferred in (False, True):
        _tl._set_deferred(deferred)
        try:
            m = dy.ParameterCollection()
            rs = np.random.RandomState(5)
            Wx, U = m.add_parameters((5 * H, D)), m.add_parameters((5 * H, 2 * H))
            b = m.add_parameters(5 * H)
            for p in (Wx, U, b):
                p.set_value(rs.uniform(-0.5, 0.5, size=p.shape()))
            dy.renew_cg(autobatching=True)
            xs = [dy.inputTensor(v) for v in np.random.RandomState(6).randn(6, D)]
            ex = [Wx.expr(True), U.expr(True), b.expr(True)]
            nodes = [dy.nary_tree_lstm(x, *ex) for x in xs]
            while len(nodes) > 1:
                nodes = [dy.nary_tree_lstm(None, *ex, *nodes[i:i + 2]) for i in range(0, len(nodes), 2)]
            loss = dy.sum_elems(nodes[0])
            loss.value()
            loss.backward()
            out.append(([p.grad_as_array().copy() for p in (Wx, U)], _tl._last_flush()))
        finally:
            _tl._set_deferred(True)
    (want, (q0, _)), (got, last) = out
    assert q0 == 0
    _check_queue(device, last)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-13)
