"""The fused tree nodes (dy.nary_tree_lstm, dy.child_sum_tree_lstm, dy.tree_rnn)
against the same equations composed from plain operations: values and
gradients, batched and broadcast inputs, more children than positions, DyNet's
cell terms, and the deferred weight products of tree_weights."""

import numpy as np
import pytest

import dyn as dy
from dyn._core.ops import treelstm as _k


def _inp(rng, n, bd):
    return dy.inputTensor(rng.randn(n, bd) if bd > 1 else rng.randn(n), batched=bd > 1)


def _sig(e):
    return dy.logistic(e)


def _rows(e, a, b):
    return dy.pickrange(e, a, b)


def _plain_nary(x, Wx, U, b, kids, H, N, fb=1.0, Uc=None):
    """The N-ary cell from plain operations (full (3+N)H rows; unused f rows are harmless)."""
    sums = [[] for _ in range(N)]
    for j, k in enumerate(kids):
        sums[min(j, N - 1)].append(k)
    terms = [b]
    if x is not None:
        terms.append(Wx * x)
    if kids:
        terms.append(
            U * dy.concatenate([dy.esum([_rows(k, 0, H) for k in s]) if s else dy.zeros((H,)) for s in sums])
        )
    if Uc is not None and kids:
        cc = Uc * dy.concatenate(
            [dy.esum([_rows(k, H, 2 * H) for k in s]) if s else dy.zeros((H,)) for s in sums]
        )
        terms.append(dy.concatenate([_rows(cc, 0, 2 * H), dy.zeros((H,)), _rows(cc, 2 * H, (2 + N) * H)]))
    a = dy.esum(terms)
    i, o, u = _sig(_rows(a, 0, H)), _sig(_rows(a, H, 2 * H)), dy.tanh(_rows(a, 2 * H, 3 * H))
    c = dy.cmult(i, u)
    for j, k in enumerate(kids):
        m = 3 + min(j, N - 1)
        c = c + dy.cmult(_sig(_rows(a, m * H, (m + 1) * H) + fb), _rows(k, H, 2 * H))
    return dy.concatenate([dy.cmult(o, dy.tanh(c)), c])


def _plain_child_sum(x, Wx, U, b, kids, H, fb=1.0):
    a = b if x is None else b + Wx * x
    hsum = dy.esum([_rows(k, 0, H) for k in kids]) if kids else None
    aiou = _rows(a, 0, 3 * H) + (_rows(U, 0, 3 * H) * hsum if kids else 0)
    i, o, u = _sig(_rows(aiou, 0, H)), _sig(_rows(aiou, H, 2 * H)), dy.tanh(_rows(aiou, 2 * H, 3 * H))
    c = dy.cmult(i, u)
    Uf = dy.select_rows(U, list(range(3 * H, 4 * H)))
    for k in kids:
        f = _sig(_rows(a, 3 * H, 4 * H) + Uf * _rows(k, 0, H) + fb)
        c = c + dy.cmult(f, _rows(k, H, 2 * H))
    return dy.concatenate([dy.cmult(o, dy.tanh(c)), c])


def _plain_rnn(x, Wx, U, b, kids, H, N):
    sums = [[] for _ in range(N)]
    for j, k in enumerate(kids):
        sums[min(j, N - 1)].append(k)
    a = b + U * dy.concatenate([dy.esum(s) if s else dy.zeros((H,)) for s in sums])
    return dy.tanh(a if x is None else a + Wx * x)


CASES = [  # (mode, N, #children, has x, child batch sizes, x batch, cell terms)
    ("nary", 2, 2, False, (1, 1), 1, False),
    ("nary", 2, 0, True, (), 1, False),
    ("nary", 2, 1, True, (3,), 1, False),
    ("nary", 2, 3, True, (3, 1, 3), 3, False),
    ("nary", 3, 2, True, (1, 3), 1, True),
    ("nary", 1, 3, False, (1, 1, 1), 1, True),
    ("child_sum", 0, 3, True, (1, 3, 1), 1, False),
    ("child_sum", 0, 0, True, (), 3, False),
    ("child_sum", 0, 2, False, (3, 3), 1, False),
    ("rnn", 2, 3, False, (1, 3, 1), 1, False),
    ("rnn", 3, 2, True, (1, 1), 3, False),
]


def _build(case, seed, plain, wrap=False):
    mode, N, p, hx, kid_bds, xbd, uc = case
    rng = np.random.RandomState(seed)
    H, n_in = 3, 2
    R = {"nary": (3 + N) * H, "child_sum": 4 * H, "rnn": H}[mode]
    cols = {"nary": N * H, "child_sum": H, "rnn": N * H}[mode]
    W = [dy.inputTensor(rng.randn(*s) * 0.7) for s in ((R, n_in), (R, cols), (R,))]
    Wx, U, b = W
    Uc = dy.inputTensor(rng.randn((2 + N) * H, N * H) * 0.7) if uc else None
    if wrap:
        Wx, U = _k.tree_weights(Wx), _k.tree_weights(U)
        Uc = _k.tree_weights(Uc) if uc else None
    x = _inp(rng, n_in, xbd) if hx else None
    kids = [_inp(rng, H if mode == "rnn" else 2 * H, bd) for bd in kid_bds[:p]]
    if mode == "nary":
        y = (
            _plain_nary(x, Wx, U, b, kids, H, N, 0.7, Uc)
            if plain
            else dy.nary_tree_lstm(x, Wx, U, b, *kids, forget_bias=0.7, Uc=Uc)
        )
    elif mode == "child_sum":
        y = (
            _plain_child_sum(x, Wx, U, b, kids, H, 0.7)
            if plain
            else dy.child_sum_tree_lstm(x, Wx, U, b, *kids, forget_bias=0.7)
        )
    else:
        y = _plain_rnn(x, Wx, U, b, kids, H, N) if plain else dy.tree_rnn(x, Wx, U, b, *kids)
    inputs = [e for e in [W[0], W[1], W[2], x, Uc] + kids if e is not None]
    return y, inputs


def _value_and_grads(case, plain, wrap=False):
    dy.renew_cg()
    y, inputs = _build(case, 1, plain, wrap)
    dims, bd = y.dim()
    r = np.random.RandomState(7).uniform(-1, 1, size=dims + ((bd,) if bd > 1 else ()))
    loss = dy.sum_batches(dy.sum_elems(dy.cmult(y, dy.inputTensor(r, batched=bd > 1))))
    loss.backward(full=True)
    return y.npvalue(), [e.gradient() for e in inputs], loss


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_fused_node_equals_composition(case, float64):
    fused, grads, loss = _value_and_grads(case, plain=False)
    assert dy.check_grad(loss) == []
    want, want_grads = _value_and_grads(case, plain=True)[:2]
    np.testing.assert_allclose(fused, want, rtol=1e-10, atol=1e-12)
    for got, exp in zip(grads, want_grads):
        np.testing.assert_allclose(got, exp, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("case", [c for c in CASES if c[0] != "child_sum" or c[2]], ids=str)
def test_deferred_weight_products_equal_direct(case, float64):
    direct = _value_and_grads(case, plain=False)
    deferred = _value_and_grads(case, plain=False, wrap=True)
    np.testing.assert_allclose(deferred[0], direct[0], rtol=0, atol=0)
    for got, exp in zip(deferred[1], direct[1]):
        np.testing.assert_allclose(got, exp, rtol=1e-12, atol=1e-13)


def test_float32_matches_float64():
    case = ("nary", 2, 2, True, (3, 1), 3, True)
    y32 = _value_and_grads(case, plain=False)[0]
    dy.set_precision("float64")
    try:
        y64 = _value_and_grads(case, plain=False)[0]
    finally:
        dy.set_precision("float32")
    np.testing.assert_allclose(y32, y64, rtol=1e-4, atol=1e-5)


def test_tree_weights_over_a_tree_with_shared_weights(float64):
    """Many nodes share the wrapped weights; the grouped products equal per-node ones."""
    rng = np.random.RandomState(3)
    m = dy.ParameterCollection()
    H, n_in = 3, 2
    Wx, U, b = m.add_parameters((4 * H, n_in)), m.add_parameters((4 * H, H)), m.add_parameters(4 * H)
    grads, r = [], rng.randn(2 * H)
    for wrap in (False, True):
        dy.renew_cg()
        w = (lambda e: _k.tree_weights(e)) if wrap else (lambda e: e)
        ex = [w(Wx.expr(True)), w(U.expr(True)), b.expr(True)]
        xs = [dy.inputTensor(v) for v in np.random.RandomState(4).randn(5, n_in)]
        leaves = [dy.child_sum_tree_lstm(x, *ex) for x in xs]
        mid = dy.child_sum_tree_lstm(xs[0], *ex, *leaves[:3])
        root = dy.child_sum_tree_lstm(None, *ex, mid, *leaves[3:])
        loss = dy.sum_elems(dy.cmult(root, dy.inputTensor(r)))
        if wrap:
            assert dy.check_grad(loss) == []
        for p in (Wx, U, b):
            p.write_grads(0)
        loss.backward()
        grads.append([p.grad_as_array().copy() for p in (Wx, U, b)])
    for got, exp in zip(*grads):
        np.testing.assert_allclose(got, exp, rtol=1e-12, atol=1e-13)


def test_bad_arguments_raise_at_creation():
    x, c = dy.inputTensor(np.zeros(2)), dy.inputTensor(np.zeros(6))
    Wx, U, b = dy.zeros((15, 2)), dy.zeros((15, 6)), dy.zeros((15,))
    with pytest.raises(ValueError, match="nary_tree_lstm: child 0 must be a vector"):
        dy.nary_tree_lstm(x, Wx, U, b, dy.zeros((4,)))
    with pytest.raises(ValueError, match="U must be"):
        dy.nary_tree_lstm(x, Wx, dy.zeros((14, 6)), b, c)
    with pytest.raises(ValueError, match="Wx must be"):
        dy.nary_tree_lstm(dy.zeros((3,)), Wx, U, b)
    with pytest.raises(ValueError, match="needs an input x or at least one child"):
        dy.nary_tree_lstm(None, Wx, U, b)
    with pytest.raises(ValueError, match="batch sizes differ"):
        dy.nary_tree_lstm(x, Wx, U, b, dy.zeros((6,), batch_size=2), dy.zeros((6,), batch_size=3))
    with pytest.raises(ValueError, match="must not be batched"):
        dy.nary_tree_lstm(x, Wx, U, dy.zeros((15,), batch_size=2), c)
    with pytest.raises(ValueError, match="Uc must be"):
        dy.nary_tree_lstm(x, Wx, U, b, c, Uc=dy.zeros((3, 3)))
    with pytest.raises(ValueError, match="only for nary_tree_lstm"):
        _k.tree_node(2, x, dy.zeros((12, 2)), dy.zeros((12, 3)), dy.zeros((12,)), [c], Uc=c)
    with pytest.raises(TypeError, match="child 0 must be an Expression"):
        dy.tree_rnn(None, None, dy.zeros((3, 6)), dy.zeros((3,)), np.zeros(3))
    with pytest.raises(ValueError, match="child_sum_tree_lstm: U must be"):
        dy.child_sum_tree_lstm(x, Wx, U, b, c)
    y = dy.nary_tree_lstm(x, Wx, U, b, c, c, c)  # the graph is still usable
    assert y.dim() == ((6,), 1)


def test_tree_weights_of_a_computed_matrix_and_state_part(float64):
    """tree_weights copies a weight that is not a parameter or input; state_part
    is pick_range on [h; c] without an index list."""
    rng = np.random.RandomState(5)
    H, n_in = 3, 2
    Wx0, U0, b0 = (dy.inputTensor(rng.randn(*s)) for s in ((5 * H, n_in), (5 * H, 2 * H), (5 * H,)))
    Wx, U = _k.tree_weights(Wx0 * 0.5), _k.tree_weights(dy.tanh(U0))
    xs = [dy.inputTensor(rng.randn(n_in, 2), batched=True) for _ in range(3)]
    leaves = [dy.nary_tree_lstm(x, Wx, U, b0) for x in xs]
    root = dy.nary_tree_lstm(xs[0], Wx, U, b0, leaves[0], dy.nary_tree_lstm(None, Wx, U, b0, *leaves[1:]))
    h, c = _k.state_part(root, 0), _k.state_part(root, 1)
    np.testing.assert_array_equal(h.npvalue(), dy.pickrange(root, 0, H).npvalue())
    np.testing.assert_array_equal(c.npvalue(), dy.pickrange(root, H, 2 * H).npvalue())
    loss = dy.sum_batches(dy.sum_elems(dy.cmult(h, h) + c))
    assert dy.check_grad(loss) == []
