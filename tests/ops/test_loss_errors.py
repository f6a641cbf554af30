"""Bad arguments to the loss, normalisation, sparse-map and gradient-flow ops
raise at creation, naming the op, and leave the graph usable; plus what the
generated tests cannot see: gradients that differ from finite differences by
design (flip/scale_gradient, straight-through argmax), the sparse maps'
Jacobians on both sides of their kinks, DyNet's special cases, and float32
against float64 for every op of the family."""

import math

import numpy as np
import pytest

import dyn as dy
from dyn._core.core import graph as _graph
from dyn.ops._registry import REGISTRY

from . import _harness as H


def _still_usable(n_before):
    assert _graph.num_nodes() == n_before, "a failed call left a node behind"
    x = dy.inputVector([1.0, 2.0])
    assert dy.sum_elems(x).scalar_value() == pytest.approx(3.0)


def _raises(exc, match, fn, *args, **kwargs):
    n = _graph.num_nodes()
    with pytest.raises(exc, match=match):
        fn(*args, **kwargs)
    _still_usable(n)


def _vec(*v):
    return dy.inputVector(list(v))


def _batched(a):
    return dy.inputTensor(np.asarray(a, dtype=float), batched=True)


# ---------------------------------------------------------------- errors

_ONE_ARG = {
    "hinge": lambda x: dy.hinge(x, 0),
    "hinge_batch": lambda x: dy.hinge_batch(x, [0]),
    "hinge_dim": lambda x: dy.hinge_dim(x, [0]),
    "poisson_loss": lambda x: dy.poisson_loss(x, 1),
    "sparsemax": dy.sparsemax,
    "sparsemax_loss": lambda x: dy.sparsemax_loss(x, [0]),
    "flip_gradient": dy.flip_gradient,
    "scale_gradient": dy.scale_gradient,
    "argmax": lambda x: dy.argmax(x, "zero_gradient"),
}
_TWO_ARGS = [
    "binary_log_loss",
    "huber_distance",
    "l1_distance",
    "pairwise_rank_loss",
    "constrained_softmax",
    "weight_norm",
]


@pytest.mark.parametrize("name", sorted(_ONE_ARG))
def test_rejects_non_expressions(name):
    _raises(TypeError, name + ": expected an Expression", _ONE_ARG[name], np.ones(3))


@pytest.mark.parametrize("name", _TWO_ARGS)
def test_two_argument_ops_reject_non_expressions(name):
    x = _vec(0.5)
    fn = getattr(dy, name)
    _raises(TypeError, name + ": expected an Expression", fn, [0.5], x)
    _raises(TypeError, name + ": expected an Expression", fn, x, 0.5)


def test_hinge_errors():
    x = _vec(1.0, 2.0, 3.0)
    _raises(IndexError, r"hinge: index 3 out of range.*\{3\}", dy.hinge, x, 3)
    _raises(IndexError, "hinge: index -1 out of range", dy.hinge, x, -1)
    _raises(TypeError, "hinge: indices must be integers", dy.hinge, x, 1.0)
    _raises(ValueError, "hinge: the margin m must be >= 0", dy.hinge, x, 0, -1.0)
    _raises(TypeError, "hinge: m must be a number", dy.hinge, x, 0, "1")
    _raises(ValueError, r"hinge: x must be a vector.*\{3,2\}", dy.hinge, dy.inputTensor(np.zeros((3, 2))), 0)
    _raises(ValueError, "hinge: x is batched.*hinge_batch", dy.hinge, _batched(np.zeros((3, 2))), 0)


def test_hinge_batch_errors():
    xb = _batched(np.zeros((3, 2)))
    _raises(ValueError, "hinge_batch: 3 indices for x of batch size 2", dy.hinge_batch, xb, [0, 1, 2])
    _raises(ValueError, "hinge_batch: vs is empty", dy.hinge_batch, xb, [])
    _raises(IndexError, "hinge_batch: index 3 out of range", dy.hinge_batch, xb, [0, 3])
    _raises(TypeError, "hinge_batch: vs must be a sequence", dy.hinge_batch, xb, 1)
    _raises(ValueError, "hinge_batch: the margin", dy.hinge_batch, xb, [0, 1], -0.5)
    _raises(
        ValueError, "hinge_batch: x must be a vector", dy.hinge_batch, _batched(np.zeros((3, 2, 2))), [0, 1]
    )
    # any iterable of ints, as DyNet's vector[unsigned]
    a = dy.hinge_batch(xb, np.array([0, 2])).npvalue()
    assert a.shape == (1, 2)


def test_hinge_dim_errors():
    x = dy.inputTensor(np.zeros((4, 3)))
    _raises(
        ValueError,
        r"hinge_dim: 2 indices for x of dim \{4,3\} with d=0; give one index per column",
        dy.hinge_dim,
        x,
        [0, 1],
    )
    _raises(ValueError, "hinge_dim: 3 indices .* per row", dy.hinge_dim, x, [0, 1, 2], 1)
    _raises(IndexError, "hinge_dim: index 4 out of range along dimension 0", dy.hinge_dim, x, [0, 4, 1])
    _raises(IndexError, "hinge_dim: index 3 out of range along dimension 1", dy.hinge_dim, x, [0, 3, 1, 1], 1)
    _raises(ValueError, "hinge_dim: d must be 0", dy.hinge_dim, x, [0, 1, 2], 2)
    _raises(TypeError, "hinge_dim: d must be an integer", dy.hinge_dim, x, [0, 1, 2], 0.0)
    _raises(ValueError, "hinge_dim: v is empty", dy.hinge_dim, x, [])
    _raises(TypeError, "hinge_dim: v must be a sequence", dy.hinge_dim, x, 0)
    _raises(ValueError, "hinge_dim: the margin", dy.hinge_dim, x, [0, 1, 2], 0, -1)
    _raises(
        ValueError,
        "hinge_dim: x must have at most 2 dimensions",
        dy.hinge_dim,
        dy.inputTensor(np.zeros((2, 2, 2))),
        [0, 1],
    )


@pytest.mark.parametrize("name", ["binary_log_loss", "huber_distance", "l1_distance"])
def test_distance_errors(name):
    fn = getattr(dy, name)
    _raises(
        ValueError,
        r"%s: dimensions must match, got \{3\} and \{2\}" % name,
        fn,
        _vec(0.5, 0.5, 0.5),
        _vec(0.5, 0.5),
    )
    a = _batched(np.full((2, 2), 0.5))
    b = _batched(np.full((2, 3), 0.5))
    _raises(ValueError, "%s: batch sizes differ" % name, fn, a, b)


def test_huber_c_errors():
    x = _vec(1.0)
    _raises(ValueError, "huber_distance: c must be > 0", dy.huber_distance, x, x, 0.0)
    _raises(TypeError, "huber_distance: c must be a number", dy.huber_distance, x, x, None)


def test_poisson_loss_errors():
    ll = dy.scalarInput(0.5)
    _raises(TypeError, "poisson_loss: x must be a non-negative integer", dy.poisson_loss, ll, 2.0)
    _raises(ValueError, "poisson_loss: x must be a non-negative integer, got -1", dy.poisson_loss, ll, -1)
    _raises(
        ValueError,
        r"poisson_loss: log_lambda must have one element.*\{2\}",
        dy.poisson_loss,
        _vec(0.1, 0.2),
        1,
    )
    _raises(TypeError, "poisson_loss: expected an Expression", dy.poisson_loss, 0.5, 1)
    assert dy.poisson_loss(ll, np.int64(2)).scalar_value() == pytest.approx(
        math.exp(0.5) - 2 * 0.5 + math.log(2), rel=1e-6
    )


def test_pairwise_rank_loss_errors():
    col = _vec(1.0, 2.0)
    row = dy.inputTensor(np.zeros((1, 2)))
    _raises(
        ValueError, r"pairwise_rank_loss: .*row vectors.*\{2\} and \{2\}", dy.pairwise_rank_loss, col, col
    )
    _raises(
        ValueError,
        r"pairwise_rank_loss: .*\{1,2\} and \{1,3\}",
        dy.pairwise_rank_loss,
        row,
        dy.inputTensor(np.zeros((1, 3))),
    )
    _raises(TypeError, "pairwise_rank_loss: m must be a number", dy.pairwise_rank_loss, row, row, "x")


def test_sparsemax_errors():
    m = dy.inputTensor(np.zeros((3, 2)))
    _raises(ValueError, r"sparsemax: x must be a vector.*\{3,2\}", dy.sparsemax, m)
    _raises(ValueError, "sparsemax_loss: x must be a vector", dy.sparsemax_loss, m, [0])
    x = _vec(1.0, 2.0, 3.0)
    _raises(IndexError, "sparsemax_loss: target index 3 out of range", dy.sparsemax_loss, x, [0, 3])
    _raises(ValueError, "sparsemax_loss: target_support is empty", dy.sparsemax_loss, x, [])
    _raises(TypeError, "sparsemax_loss: indices must be integers", dy.sparsemax_loss, x, [0.5])
    _raises(TypeError, "sparsemax_loss: target_support must be a sequence", dy.sparsemax_loss, x, 1)


def test_constrained_softmax_errors():
    x = _vec(1.0, 2.0, 3.0)
    _raises(
        ValueError,
        r"constrained_softmax: .*same dimensions.*\{3\} and \{2\}",
        dy.constrained_softmax,
        x,
        _vec(0.5, 0.5),
    )
    m = dy.inputTensor(np.zeros((3, 2)))
    _raises(ValueError, "constrained_softmax: .*vectors", dy.constrained_softmax, m, m)
    _raises(
        ValueError,
        "constrained_softmax: batch sizes differ",
        dy.constrained_softmax,
        _batched(np.zeros((3, 2))),
        _batched(np.ones((3, 4))),
    )


def test_layer_norm_errors():
    x = _vec(1.0, 2.0, 3.0)
    g2 = _vec(1.0, 1.0)
    _raises(
        ValueError,
        r"layer_norm: g and b must have the dimensions of x.*x \{3\}, g \{2\}, b \{3\}",
        dy.layer_norm,
        x,
        g2,
        x,
    )
    _raises(ValueError, "layer_norm: g and b", dy.layer_norm, x, x, g2)
    _raises(TypeError, "layer_norm: expected an Expression", dy.layer_norm, x, x, 1.0)
    _raises(
        ValueError,
        "layer_norm: batch sizes differ",
        dy.layer_norm,
        _batched(np.zeros((3, 2))),
        x,
        _batched(np.zeros((3, 4))),
    )


def test_weight_norm_errors():
    w = dy.inputTensor(np.ones((2, 3)))
    _raises(
        ValueError, r"weight_norm: g must have a single element, got \{2\}", dy.weight_norm, w, _vec(1, 2)
    )


def test_gradient_flow_and_argmax_errors():
    x = _vec(1.0, 2.0)
    _raises(TypeError, "scale_gradient: lambd must be a number", dy.scale_gradient, x, "2")
    _raises(ValueError, "argmax: gradient_mode must be 'zero_gradient'", dy.argmax, x, "straight")
    _raises(TypeError, "argmax: gradient_mode must be a string", dy.argmax, x, 0)
    _raises(
        ValueError,
        r"argmax: x must be a vector.*\{2,2\}",
        dy.argmax,
        dy.inputTensor(np.zeros((2, 2))),
        "zero_gradient",
    )


# ---------------------------------------------------------------- gradients by design


def _grad_of(x_expr, loss):
    loss.backward(full=True)
    return x_expr.gradient()


def test_flip_and_scale_gradient(float64):
    a = np.array([[0.5, -1.0], [2.0, 0.25]])
    r = np.array([[1.0, 2.0], [-3.0, 0.5]])
    for fn, factor in [
        (dy.flip_gradient, -1.0),
        (lambda e: dy.scale_gradient(e, 0.25), 0.25),
        (dy.scale_gradient, 1.0),
    ]:
        dy.renew_cg()
        x = dy.inputTensor(a)
        y = fn(x)
        np.testing.assert_array_equal(y.npvalue(), a)
        g = _grad_of(x, dy.sum_elems(dy.cmult(y, dy.inputTensor(r))))
        np.testing.assert_allclose(g, factor * r, rtol=0, atol=0)


def test_flip_gradient_reaches_parameters():
    m = dy.ParameterCollection()
    p = m.add_parameters((3,), init=dy.ConstInitializer(1.0))
    loss = dy.sum_elems(dy.flip_gradient(p.expr(True)) * 2.0)
    loss.backward()
    np.testing.assert_allclose(p.grad_as_array(), [-2.0, -2.0, -2.0])


def test_argmax_value_and_gradients(float64):
    xb = np.array([[0.1, 3.0], [0.7, -1.0], [0.7, 2.0]])  # column 0 ties: the first maximum wins
    x = _batched(xb)
    y = dy.argmax(x, "straight_through_gradient")
    np.testing.assert_array_equal(y.npvalue(), [[0, 1], [1, 0], [0, 0]])
    r = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    loss = dy.sum_batches(dy.sum_elems(dy.cmult(y, _batched(r))))
    np.testing.assert_allclose(_grad_of(x, loss), r)
    dy.renew_cg()
    x = _batched(xb)
    y = dy.argmax(x, "zero_gradient")
    loss = dy.sum_batches(dy.sum_elems(dy.cmult(y, _batched(r))))
    np.testing.assert_array_equal(_grad_of(x, loss), np.zeros_like(r))


def test_argmax_zero_gradient_stops_parameters():
    m = dy.ParameterCollection()
    p = m.add_parameters((3,), init=dy.NumpyInitializer(np.array([0.1, 0.9, 0.3])))
    q = m.add_parameters((3,), init=dy.ConstInitializer(1.0))
    loss = dy.dot_product(dy.argmax(p.expr(True), "zero_gradient"), q.expr(True))
    assert loss.scalar_value() == pytest.approx(1.0)
    loss.backward()
    np.testing.assert_array_equal(p.grad_as_array(), np.zeros(3))
    np.testing.assert_allclose(q.grad_as_array(), [0.0, 1.0, 0.0])


# ---------------------------------------------------------------- sparse maps


def _fd_jacobian(fn, a, eps=1e-6):
    cols = []
    for i in range(a.size):
        d = np.zeros_like(a)
        d.flat[i] = eps
        cols.append((fn(a + d) - fn(a - d)) / (2 * eps))
    return np.stack(cols, axis=-1)


def _value(op, *arrays):
    dy.renew_cg()
    return op(*[dy.inputVector(list(a)) for a in arrays]).npvalue()


def test_sparsemax_properties_and_jacobian(float64):
    z = np.array([1.2, 0.9, -0.4, 1.1, -2.0])
    p = _value(dy.sparsemax, z)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(p >= 0) and np.count_nonzero(p) == 3
    # a dominant entry gives a one-hot; equal entries the uniform distribution
    np.testing.assert_allclose(_value(dy.sparsemax, np.array([5.0, 0.0, 1.0])), [1.0, 0.0, 0.0])
    np.testing.assert_allclose(_value(dy.sparsemax, np.full(4, 0.3)), np.full(4, 0.25))
    # Jacobian: (I - 1 1^T / |S|) on the support, 0 elsewhere
    jac = np.zeros((5, 5))
    for i in range(5):
        dy.renew_cg()
        x = dy.inputVector(list(z))
        jac[i] = _grad_of(x, dy.pick(dy.sparsemax(x), i))
    np.testing.assert_allclose(jac, _fd_jacobian(lambda a: _value(dy.sparsemax, a), z), atol=1e-8)


def test_sparsemax_loss_gradient_and_zero(float64):
    z = np.array([0.3, 1.5, -0.2, 1.4])
    x = dy.inputVector(list(z))
    g = _grad_of(x, dy.sparsemax_loss(x, [1, 3]))
    q = np.array([0.0, 0.5, 0.0, 0.5])
    np.testing.assert_allclose(g, _value(dy.sparsemax, z) - q, atol=1e-12)
    # the loss is 0 exactly when sparsemax(z) = q
    dy.renew_cg()
    assert dy.sparsemax_loss(dy.inputVector([0.0, 2.0, -1.0, 2.0]), [1, 3]).scalar_value() == pytest.approx(
        0.0, abs=1e-12
    )
    # a repeated target counts twice in q
    dy.renew_cg()
    x = dy.inputVector(list(z))
    g = _grad_of(x, dy.sparsemax_loss(x, [1, 1, 3]))
    np.testing.assert_allclose(g, _value(dy.sparsemax, z) - np.array([0, 2 / 3, 0, 1 / 3]), atol=1e-12)


def test_constrained_softmax_clips_and_differentiates(float64):
    z = np.array([2.0, 1.0, 0.0, -0.5])
    u = np.array([0.4, 0.5, 0.6, 0.6])
    p = _value(dy.constrained_softmax, z, u)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    assert p[0] == 0.4 and np.all(p <= u + 1e-15) and p[1] < 0.5
    # the unclipped entries keep softmax ratios
    assert p[1] / p[2] == pytest.approx(math.e, rel=1e-12)
    # loose bounds: the plain softmax
    e = np.exp(z) / np.exp(z).sum()
    np.testing.assert_allclose(_value(dy.constrained_softmax, z, np.ones(4)), e, rtol=1e-12)
    # infeasible bounds (sum < 1): every entry at its bound
    np.testing.assert_allclose(_value(dy.constrained_softmax, z, np.full(4, 0.2)), np.full(4, 0.2))
    for k in range(2):
        jac = np.zeros((4, 4))
        for i in range(4):
            dy.renew_cg()
            xs = [dy.inputVector(list(z)), dy.inputVector(list(u))]
            jac[i] = _grad_of(xs[k], dy.pick(dy.constrained_softmax(*xs), i))

        def fn(a, k=k):
            return _value(dy.constrained_softmax, *((a, u) if k == 0 else (z, a)))

        np.testing.assert_allclose(jac, _fd_jacobian(fn, z if k == 0 else u), atol=1e-8)


# ---------------------------------------------------------------- DyNet's special cases


def test_binary_log_loss_is_finite_at_0_and_1():
    x = _vec(0.0, 1.0, 1.0, 0.0, 0.5)
    t = _vec(1.0, 0.0, 1.0, 0.0, 0.5)
    y = dy.binary_log_loss(x, t)
    want = -2 * math.log(np.finfo(np.float32).tiny) + math.log(2)
    assert y.scalar_value() == pytest.approx(want, rel=1e-5)
    g = _grad_of(x, y)
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g[2:], [-1.0, 1.0, 0.0], atol=1e-6)


def test_layer_norm_with_parameters_and_batch():
    m = dy.ParameterCollection()
    g = m.add_parameters((4,), init=dy.ConstInitializer(2.0))
    b = m.add_parameters((4,), init=dy.ConstInitializer(0.5))
    xb = np.array([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [4.0, 0.0]])
    y = dy.layer_norm(_batched(xb), g.expr(True), b.expr(True))
    v = y.npvalue()
    c = xb[:, 0] - 2.5
    np.testing.assert_allclose(v[:, 0], 2 * c / (c.std() + 1e-8) + 0.5, rtol=1e-5)
    np.testing.assert_allclose(v[:, 1], 0.5)  # a constant input has std 0: only the bias
    dy.sum_batches(dy.sum_elems(y)).backward()
    np.testing.assert_allclose(b.grad_as_array(), [2.0] * 4)
    assert np.all(np.isfinite(g.grad_as_array()))


def test_weight_norm_of_zero_is_zero():
    w = dy.inputTensor(np.zeros((2, 2)))
    y = dy.weight_norm(w, dy.scalarInput(3.0))
    np.testing.assert_array_equal(y.npvalue(), np.zeros((2, 2)))
    assert np.all(np.isfinite(_grad_of(w, dy.sum_elems(y))))


# ---------------------------------------------------------------- float32 against float64

_FAMILY = sorted(n for n, s in REGISTRY.items() if s.family == "loss")


def _run(spec, case, mode):
    arrays, bds = H.make_arrays(spec, case, mode, seed=3)
    dy.renew_cg()
    xs, y = H.build(spec, case, arrays, bds, reusable=True)
    value = y.npvalue()
    H.loss_of(y, seed=5).backward(full=True)
    return value, [x.gradient() for x in xs]


@pytest.mark.parametrize("name", _FAMILY)
def test_float32_matches_float64(name):
    spec = REGISTRY[name]
    for case in spec.cases:
        mode = ("all", None) if "all" in case.batches else ("none", None)
        v32, g32 = _run(spec, case, mode)
        dy.set_precision("float64")
        try:
            v64, g64 = _run(spec, case, mode)
        finally:
            dy.set_precision("float32")
        np.testing.assert_allclose(v32, v64, rtol=2e-5, atol=2e-6, err_msg=name)
        for a, b in zip(g32, g64):
            np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5, err_msg=name + " gradient")


def test_family_is_complete():
    want = {
        "hinge",
        "hinge_batch",
        "hinge_dim",
        "binary_log_loss",
        "huber_distance",
        "l1_distance",
        "poisson_loss",
        "pairwise_rank_loss",
        "sparsemax",
        "sparsemax_loss",
        "constrained_softmax",
        "layer_norm",
        "weight_norm",
        "flip_gradient",
        "scale_gradient",
        "argmax",
    }
    assert want == set(_FAMILY)
    for name in want:
        assert getattr(dy, name) is REGISTRY[name].fn
