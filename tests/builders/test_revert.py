"""cg_checkpoint()/cg_revert() with builders (a decoder's or a search's pattern).

Builders cache expressions per graph (their parameters, derived weights,
dropout masks) and states cache parts made on demand (an LSTM's c, a tree
node's h). When cg_revert() drops such a node, another node soon takes its id:
the cache must be made again, never read through the old id. Each case runs
the builder once inside a checkpoint, reverts, fills the dropped ids with input
nodes of the same shapes (what silently gave wrong values before), runs again,
and compares values and gradients with a fresh graph.
"""

import numpy as np
import pytest
from dyn._core.core.expr import all_alive

import dyn as dy

IN, H = 3, 4

RNN = {
    "vanilla": lambda m: dy.VanillaLSTMBuilder(2, IN, H, m),
    "vanilla_ln": lambda m: dy.VanillaLSTMBuilder(1, IN, H, m, ln_lstm=True),
    "compact": lambda m: dy.CompactVanillaLSTMBuilder(2, IN, H, m),
    "sparse": lambda m: dy.SparseLSTMBuilder(1, IN, H, m),
    "coupled": lambda m: dy.CoupledLSTMBuilder(1, IN, H, m),
    "gru": lambda m: dy.GRUBuilder(2, IN, H, m),
    "simple": lambda m: dy.SimpleRNNBuilder(1, IN, H, m),
}

TREE = {
    "nary": lambda m: dy.NaryTreeLSTMBuilder(2, 2, IN, H, m),
    "nary_ln": lambda m: dy.NaryTreeLSTMBuilder(2, 1, IN, H, m, ln_lstm=True),
    "child_sum": lambda m: dy.ChildSumTreeLSTMBuilder(1, IN, H, m),
    "tree_rnn": lambda m: dy.TreeRNNBuilder(1, H, m, input_dim=IN),
    "bidirectional": lambda m: dy.BidirectionalTreeLSTMBuilder(1, H, H, m),
}


def _model(make):
    m = dy.ParameterCollection()
    b = make(m)
    rng = np.random.RandomState(3)
    for p in m.parameters_list():
        if p.is_updated():  # SparseLSTMBuilder's masks stay as they are
            p.set_value(rng.uniform(-0.5, 0.5, p.shape()))
    return m, b


def _xs(b, n=3):
    rng = np.random.RandomState(7)
    return [dy.inputVector(rng.uniform(-1, 1, b.input_dim)) for _ in range(n)]


def _fill(m):
    """Input nodes shaped like the model's parameters, in their order: they take the ids a
    reverted builder's parameter nodes had."""
    return [dy.inputTensor(np.full(p.shape(), 0.25)) for p in m.parameters_list()]


def _grads(m):
    return [p.grad_as_array().copy() for p in m.parameters_list()]


def _zero(m):
    for p in m.parameters_list():
        p.write_grads(0)


def _rnn_run(b, xs, s0=None):
    states = (s0 or b.initial_state()).add_inputs(xs)
    return [s.output() for s in states] + list(states[1].s())


def _tree_run(b, xs):
    leaves = [b.add_input(x) for x in xs]
    root = b.compose([b.compose(leaves[:2]), leaves[2]])
    return [root.output(), leaves[0].output()] + list(root.s())


def _fresh(m, run, b, ab):
    _zero(m)
    dy.renew_cg(autobatching=ab)
    outs = run(b, _xs(b))
    vals = [o.npvalue() for o in outs]
    dy.esum([dy.sum_elems(o) for o in outs]).backward()
    return vals, _grads(m)


def _check(m, outs, want, ab):
    vals, grads = want
    for o, v in zip(outs, vals, strict=True):
        np.testing.assert_allclose(o.npvalue(), v, rtol=1e-12)
    _zero(m)
    dy.esum([dy.sum_elems(o) for o in outs]).backward()
    for g, w in zip(_grads(m), grads, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("ab", [False, True])
@pytest.mark.parametrize("name", sorted(RNN) + sorted(TREE))
def test_builder_made_inside_a_reverted_checkpoint(float64, name, ab):
    make, run = (RNN[name], _rnn_run) if name in RNN else (TREE[name], _tree_run)
    m, b = _model(make)
    want = _fresh(m, run, b, ab)
    dy.renew_cg(autobatching=ab)
    xs = _xs(b)
    dy.cg_checkpoint()
    [o.npvalue() for o in run(b, xs)]  # the builder's cache is made here
    dy.cg_revert()
    fill = _fill(m)
    _check(m, run(b, xs), want, ab)
    assert all(f.is_alive() for f in fill)


def _start(b, given):
    """The initial state, zero or given (DyNet's initial_state(vecs): c's then h's for LSTMs)."""
    if not given:
        return b.initial_state()
    n = b.layers * (2 if b._has_cell else 1)
    return b.initial_state([dy.inputVector(np.linspace(-0.5, 0.5, H) * (k + 1)) for k in range(n)])


@pytest.mark.parametrize("ab", [False, True])
@pytest.mark.parametrize("given", [False, True])
@pytest.mark.parametrize("name", sorted(RNN))
def test_rnn_state_parts_made_inside_a_reverted_checkpoint(float64, name, given, ab):
    """The cache and the start are made before the checkpoint; what is derived from them later
    (the LSTMs' step weights, a given state's stacked [h; c], SparseLSTMBuilder's masked weights)
    inside it."""
    m, b = _model(RNN[name])
    want = _fresh(m, lambda b, xs: _rnn_run(b, xs, _start(b, given)), b, ab)
    dy.renew_cg(autobatching=ab)
    xs = _xs(b)
    s0 = _start(b, given)
    dy.cg_checkpoint()
    [o.npvalue() for o in _rnn_run(b, xs, s0)]
    dy.cg_revert()
    _fill(m)
    _check(m, _rnn_run(b, xs, s0), want, ab)


def test_lstm_state_c_asked_for_inside_a_reverted_checkpoint(float64):
    m, b = _model(RNN["vanilla"])
    dy.renew_cg()
    xs = _xs(b)
    s = b.initial_state().add_inputs(xs)[-1]  # made before the checkpoint; c is not made yet
    dy.cg_checkpoint()
    c_inside = [e.npvalue() for e in s.s()]
    dy.cg_revert()
    _fill(m)
    for e, v in zip(s.s(), c_inside, strict=True):
        np.testing.assert_allclose(e.npvalue(), v, rtol=1e-12)


@pytest.mark.parametrize("name", sorted(TREE))
def test_tree_state_parts_asked_for_inside_a_reverted_checkpoint(float64, name):
    m, b = _model(TREE[name])
    dy.renew_cg()
    xs = _xs(b)
    leaves = [b.add_input(x) for x in xs]
    root = b.compose(leaves)  # made before the checkpoint; its h and c parts are not
    dy.cg_checkpoint()
    inside = [e.npvalue() for e in [root.output()] + list(root.s())]
    dy.cg_revert()
    _fill(m)
    for e, v in zip([root.output()] + list(root.s()), inside, strict=True):
        np.testing.assert_allclose(e.npvalue(), v, rtol=1e-12)


def test_dropout_masks_made_inside_a_reverted_checkpoint_are_sampled_again():
    m, b = _model(RNN["vanilla"])
    b.set_dropout(0.5)
    dy.renew_cg()
    xs = _xs(b)
    s0 = b.initial_state()
    dy.cg_checkpoint()
    s0.add_inputs(xs)[-1].output().npvalue()  # the masks are made here
    dy.cg_revert()
    fill = _fill(m) + [dy.inputVector(np.zeros(n)) for n in (IN, H, H, H) * 4]
    out = s0.add_inputs(xs)[-1].output()
    out.npvalue()
    dy.sum_elems(out).backward()
    assert all(all_alive(x) for x in b._cg[5])  # the masks in use are nodes of this graph
    assert all(f.is_alive() for f in fill)


def test_using_an_expression_that_cg_revert_dropped_raises():
    dy.renew_cg()
    kept = dy.inputVector([1.0, 2.0])
    dy.cg_checkpoint()
    dropped = dy.tanh(kept)
    dropped.npvalue()
    dy.cg_revert()
    same_id = dy.inputVector([5.0, 6.0])  # takes the dropped node's id, same shape
    assert kept.is_alive() and same_id.is_alive() and not dropped.is_alive()
    with pytest.raises(ValueError, match="stale expression.*dropped by cg_revert"):
        dy.tanh(dropped)
    with pytest.raises(RuntimeError, match="dropped by cg_revert"):
        dropped.npvalue()
    assert (kept + same_id).vec_value() == [6.0, 8.0]
    dy.renew_cg()
    with pytest.raises(ValueError, match="renew_cg"):
        dy.tanh(kept)


def test_a_state_that_cg_revert_dropped_is_named_as_such():
    m, b = _model(RNN["vanilla"])
    dy.renew_cg()
    s0 = b.initial_state()
    dy.cg_checkpoint()
    s1 = s0.add_input(_xs(b, 1)[0])
    dy.cg_revert()
    with pytest.raises(ValueError, match="dropped by cg_revert"):
        s1.add_input(_xs(b, 1)[0])
