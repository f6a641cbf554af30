"""Gradients left out of the arena's zeroing: a large node whose one consumer is a
pickneglogsoftmax(_batch) run alone gets its gradient written by that backward instead of
zeroed and added to (graph.mark_fresh). The results must be exactly those of the zeroed path,
with the engine on and off, in both float types, and after a graph that left other numbers in
the same memory; the path must not be taken where another call adds to the same gradient."""

import numpy as np
import pytest

import dyn as dy
from dyn._core.core import graph

V, H, B = 40, 6, 5


@pytest.fixture
def fresh_min():
    """Set the size from which gradients are left unzeroed; restored afterwards."""
    old = graph._set_fresh_min(262144)
    yield graph._set_fresh_min
    graph._set_fresh_min(old)


def _model(seed=0):
    rng = np.random.RandomState(seed)
    m = dy.ParameterCollection()
    W = m.add_parameters((V, H), init=rng.uniform(-1, 1, (V, H)))
    b = m.add_parameters(V, init=rng.uniform(-1, 1, V))
    E = m.add_lookup_parameters((10, H), init=rng.uniform(-1, 1, (10, H)))
    return m, W, b, E, rng


def _dirty_arena(W, b, rng):
    """A graph whose backward leaves large numbers all over the gradient arena."""
    dy.renew_cg()
    x = dy.inputTensor(rng.uniform(-1, 1, (H, 3 * B)), batched=True)
    s = dy.affine_transform([dy.parameter(b), dy.parameter(W), x])
    big = dy.inputTensor(rng.uniform(50, 100, (V, 3 * B)), batched=True)
    dy.sum_batches(dy.sum_elems(dy.cmult(s, big))).backward()


def _grads(build, fmin, autobatch, fresh_min, seed=0):
    """Gradients of every parameter, of the inputs and of the scores node, for the graph
    `build(W, b, E)` returns (loss, scores), the fresh path allowed from `fmin` elements."""
    m, W, b, E, rng = _model(seed)
    _dirty_arena(W, b, rng)
    for p in (W, b):
        p.scale_gradient(0.0) if hasattr(p, "scale_gradient") else None
    m2, W, b, E, _ = _model(seed)
    fresh_min(fmin)
    dy.renew_cg(autobatching=autobatch)
    loss, scores, x = build(W, b, E)
    loss.backward()
    out = [W.grad_as_array().copy(), b.grad_as_array().copy(), scores.gradient().copy()]
    if x is not None:
        out.append(x.gradient().copy())
    return out, graph._last_fresh()


def _batched(W, b, E):
    x = dy.lookup_batch(E, [1, 2, 3, 4, 5])
    h = dy.tanh(x)
    s = dy.affine_transform([dy.parameter(b), dy.parameter(W), h])
    return dy.sum_batches(dy.pickneglogsoftmax_batch(s, [0, 3, 7, 9, 39])), s, h


def _broadcast(W, b, E):
    # one score column for every batch element: each adds into the same gradient
    h = dy.tanh(dy.lookup(E, 2))
    s = dy.affine_transform([dy.parameter(b), dy.parameter(W), h])
    return dy.sum_batches(dy.pickneglogsoftmax_batch(s, [0, 3, 7, 9, 39])), s, h


def _two_consumers(W, b, E):
    h = dy.tanh(dy.lookup_batch(E, [1, 2, 3, 4, 5]))
    s = dy.affine_transform([dy.parameter(b), dy.parameter(W), h])
    extra = dy.sum_elems(dy.square(s))
    return dy.sum_batches(dy.pickneglogsoftmax_batch(s, [0, 3, 7, 9, 39]) + 0.01 * extra), s, h


def _one_word(W, b, E):
    h = dy.tanh(dy.lookup(E, 4))
    s = dy.affine_transform([dy.parameter(b), dy.parameter(W), h])
    return dy.pickneglogsoftmax(s, 7), s, h


def _two_losses(W, b, E):
    # two score nodes of one shape: with the engine on their losses may run as one batch, and
    # then no call writes either gradient alone
    hs = [dy.tanh(dy.lookup_batch(E, [1, 2, 3, 4, 5])), dy.tanh(dy.lookup_batch(E, [5, 6, 7, 8, 9]))]
    ss = [dy.affine_transform([dy.parameter(b), dy.parameter(W), h]) for h in hs]
    losses = [dy.pickneglogsoftmax_batch(s, [0, 3, 7, 9, 39]) for s in ss]
    return dy.sum_batches(losses[0] + losses[1]), ss[0], hs[0]


# (graph, how many gradients the fresh path takes with the engine off, on)
CASES = [(_batched, 1, 1), (_broadcast, 1, 1), (_one_word, 1, 1), (_two_consumers, 0, 0), (_two_losses, 2, 0)]


@pytest.mark.parametrize("build,n_off,n_on", CASES, ids=[c[0].__name__.strip("_") for c in CASES])
@pytest.mark.parametrize("autobatch", [False, True], ids=["engine-off", "engine-on"])
@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_fresh_equals_zeroed(build, n_off, n_on, autobatch, precision, fresh_min):
    dy.set_precision(precision)
    try:
        zeroed, n0 = _grads(build, 10**9, autobatch, fresh_min)
        fresh, n1 = _grads(build, 1, autobatch, fresh_min)
    finally:
        dy.set_precision("float32")
    assert n0 == 0
    assert n1 == (n_on if autobatch else n_off)
    for a, c in zip(zeroed, fresh):
        np.testing.assert_array_equal(a, c)


def test_fresh_matches_numpy(fresh_min):
    """The written gradient is softmax - onehot, checked against numpy in float64."""
    dy.set_precision("float64")
    try:
        fresh_min(1)
        m, W, b, E, _ = _model(3)
        dy.renew_cg()
        loss, s, _ = _batched(W, b, E)
        loss.backward()
        assert graph._last_fresh() == 1
        sv = s.npvalue()
        p = np.exp(sv - sv.max(axis=0)) / np.exp(sv - sv.max(axis=0)).sum(axis=0)
        p[[0, 3, 7, 9, 39], np.arange(B)] -= 1
        np.testing.assert_allclose(s.gradient(), p, rtol=1e-12, atol=1e-14)
    finally:
        dy.set_precision("float32")


def test_default_size_takes_large_scores_only():
    """At the default size the path is taken for a score matrix of 256K elements (1 MB) or more."""
    m = dy.ParameterCollection()
    W = m.add_parameters((4096, 8))
    for batch, expect in ((63, 0), (64, 1)):
        dy.renew_cg()
        x = dy.inputTensor(np.ones((8, batch)), batched=True)
        loss = dy.sum_batches(dy.pickneglogsoftmax_batch(dy.parameter(W) * x, [1] * batch))
        loss.backward()
        assert graph._last_fresh() == expect


def test_second_backward_on_the_same_graph(fresh_min):
    """Backward twice from the same loss: the second pass writes the gradient again."""
    fresh_min(1)
    m, W, b, E, _ = _model(1)
    dy.renew_cg()
    loss, s, _ = _batched(W, b, E)
    loss.backward()
    g1 = s.gradient().copy()
    loss.backward()
    np.testing.assert_array_equal(s.gradient(), g1)


def _bias_case(batch, bias="param", seed=4):
    """A batch of `batch` score columns from affine_transform, the bias a parameter, a constant
    parameter or an input given per batch element."""
    def build(W, b, E):
        ids = [(3 * i + 1) % 10 for i in range(batch)]
        h = dy.tanh(dy.lookup_batch(E, ids))
        if bias == "param":
            bb = dy.parameter(b)
        elif bias == "const":
            bb = dy.const_parameter(b)
        else:
            bb = dy.inputTensor(np.linspace(-1, 1, V * batch).reshape(V, batch), batched=True)
        s = dy.affine_transform([bb, dy.parameter(W), h])
        return dy.sum_batches(dy.pickneglogsoftmax_batch(s, [(7 * i) % V for i in range(batch)])), s, h
    return build


@pytest.mark.parametrize("batch", [2, 3, 4, 5, 8, 9, 13])
@pytest.mark.parametrize("autobatch", [False, True], ids=["engine-off", "engine-on"])
def test_bias_gradient_summed_by_the_softmax(batch, autobatch, fresh_min):
    """float32, a parameter bias: the softmax's backward sums the bias gradient from the columns
    it writes (four at a time, the rest one by one) and affine's backward leaves it out; every
    gradient is bit for bit the zeroed path's, and the one with the fusion switched off."""
    from dyn._core.cpu import softmax
    zeroed, _ = _grads(_bias_case(batch), 10**9, autobatch, fresh_min)
    c0 = softmax._bias_sum_count()
    fused, n = _grads(_bias_case(batch), 1, autobatch, fresh_min)
    assert n == 1 and softmax._bias_sum_count() == c0 + 1
    old = softmax._set_bias_sum(False)
    try:
        plain, n = _grads(_bias_case(batch), 1, autobatch, fresh_min)
    finally:
        assert softmax._set_bias_sum(old) is False
    assert n == 1 and softmax._bias_sum_count() == c0 + 1
    assert np.any(fused[1] != 0)
    for a, c, d in zip(zeroed, fused, plain):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(d, c)


@pytest.mark.parametrize("build,why", [
    (_bias_case(5, "const"), "constant bias"), (_bias_case(5, "batched"), "a bias per element"),
    (_broadcast, "one score column"), (_one_word, "no batch"), (_two_consumers, "two consumers")])
def test_bias_gradient_left_to_affine(build, why, fresh_min):
    """Where the bias needs no gradient, is given per batch element, or the scores are not written
    fresh over a batch, affine's backward keeps the bias (no fused sum), with the same results."""
    from dyn._core.cpu import softmax
    zeroed, _ = _grads(build, 10**9, False, fresh_min)
    c0 = softmax._bias_sum_count()
    fresh, _ = _grads(build, 1, False, fresh_min)
    assert softmax._bias_sum_count() == c0, why
    for a, c in zip(zeroed, fresh):
        np.testing.assert_array_equal(a, c)


def test_bias_gradient_float64_left_to_affine(fresh_min):
    """In float64 the bias gradient stays with affine's backward (its kernel sums float32)."""
    from dyn._core.cpu import softmax
    dy.set_precision("float64")
    try:
        zeroed, _ = _grads(_bias_case(6), 10**9, False, fresh_min)
        c0 = softmax._bias_sum_count()
        fresh, _ = _grads(_bias_case(6), 1, False, fresh_min)
        assert softmax._bias_sum_count() == c0
    finally:
        dy.set_precision("float32")
    for a, c in zip(zeroed, fresh):
        np.testing.assert_array_equal(a, c)


def test_bias_gradient_twice_on_the_same_graph(fresh_min):
    """Backward twice from the same loss: the bias gradient is added once each pass (the flag that
    tells affine's backward to leave it out lasts one pass), bit for bit as without the fusion."""
    from dyn._core.cpu import softmax
    fresh_min(1)
    got = []
    for on in (True, False):
        old = softmax._set_bias_sum(on)
        try:
            m, W, b, E, _ = _model(2)
            dy.renew_cg()
            loss, s, _ = _bias_case(6)(W, b, E)
            loss.backward()
            g1 = b.grad_as_array().copy()
            loss.backward()
            got.append((g1, b.grad_as_array().copy()))
        finally:
            softmax._set_bias_sum(old)
    (g1, g2), (h1, h2) = got
    assert np.any(g1 != 0)
    np.testing.assert_allclose(g2, 2 * g1, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(g1, h1)
    np.testing.assert_array_equal(g2, h2)
