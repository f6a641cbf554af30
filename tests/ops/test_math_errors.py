"""Bad arguments to the elementwise math ops raise at creation, naming the op,
and leave the graph usable; plus what the generated tests cannot see:
straight-through and zero rounding gradients, tie-breaking in bmin/bmax and
emax/emin, stability at large inputs, float32 accuracy, lgamma's gradient
away from the generated domain."""

import numpy as np
import pytest
from scipy import special

import dyn as dy
from dyn._core.core import graph as _graph

UNARY = [
    "sqrt",
    "abs",
    "square",
    "cube",
    "erf",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "asinh",
    "acosh",
    "atanh",
    "log_sigmoid",
    "lgamma",
    "softsign",
    "elu",
    "selu",
    "silu",
]
ROUNDING = ["round", "ceil", "floor"]
STRAIGHT = "straight_through_gradient"


def _still_usable(n_before):
    assert _graph.num_nodes() == n_before, "a failed call left a node behind"
    x = dy.inputVector([1.0, 4.0])
    np.testing.assert_allclose(dy.sqrt(x).npvalue(), [1.0, 2.0])


def _raises(exc, match, fn, *args, **kwargs):
    n = _graph.num_nodes()
    with pytest.raises(exc, match=match):
        fn(*args, **kwargs)
    _still_usable(n)


# ---------------------------------------------------------------- wrong arguments


@pytest.mark.parametrize("name", UNARY)
def test_unary_rejects_non_expressions(name):
    _raises(TypeError, "^%s: expected an Expression" % name, getattr(dy, name), np.ones(3))
    _raises(TypeError, "^%s: expected an Expression" % name, getattr(dy, name), 2.0)


@pytest.mark.parametrize("name", ROUNDING)
def test_rounding_errors(name):
    fn = getattr(dy, name)
    x = dy.inputVector([0.4, 1.6])
    _raises(TypeError, "^%s: expected an Expression" % name, fn, [0.4], "zero_gradient")
    for bad in ["straight_through", "ZERO_GRADIENT", "", None, 0]:
        _raises(ValueError, "^%s: unknown gradient_mode" % name, fn, x, bad)
    with pytest.raises(TypeError):  # gradient_mode is required, as in DyNet
        fn(x)


def test_parameter_types():
    x = dy.inputVector([-1.0, 1.0])
    _raises(TypeError, "^elu: alpha must be a number", dy.elu, x, "1")
    _raises(TypeError, "^silu: beta must be a number", dy.silu, x, None)
    np.testing.assert_allclose(dy.elu(x, 2).npvalue(), [2 * np.expm1(-1.0), 1.0], rtol=1e-6)


def test_softsign_needs_a_vector():
    # DyNet's SoftSign node checks LooksLikeVector
    m = dy.inputTensor(np.zeros((3, 2)))
    _raises(ValueError, r"^softsign: input must look like a vector.*\{3,2\}", dy.softsign, m)
    col = dy.inputTensor(np.zeros((3, 1)))
    assert dy.softsign(col).dim() == ((3, 1), 1)
    xb = dy.inputTensor(np.zeros((3, 4)), batched=True)  # a batch of vectors is fine
    assert dy.softsign(xb).dim() == ((3,), 4)


@pytest.mark.parametrize("name", ["bmin", "bmax"])
def test_bminmax_errors(name):
    fn = getattr(dy, name)
    x = dy.inputVector([1.0, 2.0, 3.0])
    _raises(TypeError, "^%s: expected an Expression" % name, fn, x, 1.0)
    _raises(TypeError, "^%s: expected an Expression" % name, fn, [1.0, 2.0, 3.0], x)
    _raises(ValueError, r"^%s: .*same dimensions.*\{3\} and \{2\}" % name, fn, x, dy.inputVector([1.0, 2.0]))
    _raises(
        ValueError,
        r"^%s: .*same dimensions" % name,
        fn,
        dy.inputTensor(np.zeros((3, 2))),
        dy.inputTensor(np.zeros((2, 3))),
    )
    # no batch broadcasting: DyNet requires identical Dims, batch included
    xb = dy.inputTensor(np.zeros((3, 2)), batched=True)
    _raises(ValueError, r"^%s: .*batch size.*\{3\}x2" % name, fn, x, xb)
    _raises(ValueError, r"^%s: .*batch size" % name, fn, xb, dy.inputTensor(np.zeros((3, 4)), batched=True))


@pytest.mark.parametrize("name", ["emax", "emin"])
def test_elist_errors(name):
    fn = getattr(dy, name)
    x = dy.inputVector([1.0, 2.0])
    _raises(TypeError, "^%s: expected a list" % name, fn, (x, x))
    _raises(TypeError, "^%s: expected a list" % name, fn, x)
    _raises(TypeError, "^%s: expected a list" % name, fn, iter([x, x]))
    _raises(ValueError, "^%s: empty list" % name, fn, [])
    _raises(TypeError, "^%s: expected an Expression" % name, fn, [x, 1.0])
    _raises(
        ValueError, r"^%s: .*same dimensions.*\{2\}, \{3\}" % name, fn, [x, dy.inputVector([1.0, 2.0, 3.0])]
    )
    xb = dy.inputTensor(np.zeros((2, 3)), batched=True)
    _raises(ValueError, r"^%s: .*batch size" % name, fn, [x, xb])


# ---------------------------------------------------------------- rounding gradients


@pytest.mark.parametrize("name,ref", [("round", None), ("ceil", np.ceil), ("floor", np.floor)])
def test_straight_through_gradient(name, ref, float64):
    a = np.array([[-1.7, -0.5, 0.2], [0.5, 1.49, 2.5]])
    x = dy.inputTensor(a)
    y = getattr(dy, name)(x, STRAIGHT)
    want = np.sign(a) * np.floor(np.abs(a) + 0.5) if ref is None else ref(a)  # halves away from 0
    np.testing.assert_array_equal(y.npvalue(), want)
    r = np.arange(6.0).reshape(2, 3) - 2.5
    dy.sum_elems(dy.cmult(y, dy.inputTensor(r))).backward(full=True)
    np.testing.assert_array_equal(x.gradient(), r)  # the identity, as if y were x


@pytest.mark.parametrize("name", ROUNDING)
def test_straight_through_reaches_parameters(name):
    m = dy.ParameterCollection()
    p = m.add_parameters((3,), init=dy.NumpyInitializer(np.array([0.3, -1.2, 2.7])))
    y = getattr(dy, name)(p, STRAIGHT)
    dy.sum_elems(dy.cmult(y, dy.inputVector([1.0, 2.0, 3.0]))).backward()
    np.testing.assert_allclose(p.grad_as_array(), [1.0, 2.0, 3.0])


@pytest.mark.parametrize("name", ROUNDING)
def test_zero_gradient(name):
    m = dy.ParameterCollection()
    p = m.add_parameters((3,), init=dy.NumpyInitializer(np.array([0.3, -1.2, 2.7])))
    q = m.add_parameters((3,), init=dy.NumpyInitializer(np.array([1.0, 1.0, 1.0])))
    y = getattr(dy, name)(p, "zero_gradient")
    # the gradient stops at the rounding; other paths still get theirs
    dy.sum_elems(dy.cmult(y, q) + p).backward()
    np.testing.assert_allclose(p.grad_as_array(), [1.0, 1.0, 1.0])
    np.testing.assert_allclose(q.grad_as_array(), y.npvalue())
    dy.renew_cg()
    z = dy.inputVector([0.3, -1.2])
    dy.sum_elems(getattr(dy, name)(z, "zero_gradient")).backward(full=True)
    np.testing.assert_array_equal(z.gradient(), [0.0, 0.0])


# ---------------------------------------------------------------- ties


@pytest.mark.parametrize("name", ["bmax", "bmin"])
def test_bminmax_ties_go_to_y(name, float64):
    x = dy.inputVector([1.0, 2.0, 3.0])
    y = dy.inputVector([1.0, 5.0, 0.0])
    z = getattr(dy, name)(x, y)
    dy.sum_elems(dy.cmult(z, dy.inputVector([1.0, 10.0, 100.0]))).backward(full=True)
    if name == "bmax":
        np.testing.assert_array_equal(z.npvalue(), [1.0, 5.0, 3.0])
        np.testing.assert_array_equal(x.gradient(), [0.0, 0.0, 100.0])
        np.testing.assert_array_equal(y.gradient(), [1.0, 10.0, 0.0])
    else:
        np.testing.assert_array_equal(z.npvalue(), [1.0, 2.0, 0.0])
        np.testing.assert_array_equal(x.gradient(), [0.0, 10.0, 0.0])
        np.testing.assert_array_equal(y.gradient(), [1.0, 0.0, 100.0])


@pytest.mark.parametrize("name", ["emax", "emin"])
def test_elist_ties_go_to_the_later(name, float64):
    a = dy.inputVector([2.0, 0.0, 1.0])
    b = dy.inputVector([2.0, 0.0, 1.0])
    c = dy.inputVector([1.0, 0.0, 3.0])
    z = getattr(dy, name)([a, b, c])
    dy.sum_elems(z).backward(full=True)
    if name == "emax":
        np.testing.assert_array_equal(z.npvalue(), [2.0, 0.0, 3.0])
        grads = [[0, 0, 0], [1, 0, 0], [0, 1, 1]]
    else:
        np.testing.assert_array_equal(z.npvalue(), [1.0, 0.0, 1.0])
        grads = [[0, 0, 0], [0, 0, 1], [1, 1, 0]]
    for e, g in zip([a, b, c], grads):
        np.testing.assert_array_equal(e.gradient(), g)


def test_emax_batched_and_repeated_argument(float64):
    a = np.array([[1.0, 5.0], [4.0, 0.0]])  # {2} x 2
    x = dy.inputTensor(a, batched=True)
    y = dy.inputTensor(np.array([[2.0, 3.0], [3.0, 1.0]]), batched=True)
    z = dy.emax([x, y, x])
    np.testing.assert_array_equal(z.npvalue(), [[2.0, 5.0], [4.0, 1.0]])
    dy.sum_batches(dy.sum_elems(z)).backward(full=True)
    np.testing.assert_array_equal(x.gradient(), [[0.0, 1.0], [1.0, 0.0]])
    np.testing.assert_array_equal(y.gradient(), [[1.0, 0.0], [0.0, 1.0]])


# ---------------------------------------------------------------- numerics


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_log_sigmoid_is_stable(precision):
    dy.set_precision(precision)
    try:
        a = np.array([-1000.0, -50.0, -1.0, 0.0, 1.0, 30.0, 1000.0])
        x = dy.inputVector(a)
        y = dy.log_sigmoid(x)
        dy.sum_elems(y).backward(full=True)
        tol = 1e-6 if precision == "float32" else 1e-14
        np.testing.assert_allclose(y.npvalue(), -np.logaddexp(0, -a), rtol=tol)
        # 1 - sigmoid(x) keeps its relative precision for x >> 0 (e^-30, e^-1000)
        np.testing.assert_allclose(x.gradient(), special.expit(-a), rtol=tol * 10, atol=0)
    finally:
        dy.set_precision("float32")


def test_large_inputs_stay_finite():
    a = np.array([-1000.0, -80.0, 80.0, 1000.0])
    for fn in [dy.elu, dy.selu, dy.silu, dy.softsign, dy.erf, dy.atan, dy.asinh]:
        dy.renew_cg()
        x = dy.inputVector(a)
        y = fn(x)
        dy.sum_elems(y).backward(full=True)
        assert np.all(np.isfinite(y.npvalue())), fn.__name__
        assert np.all(np.isfinite(x.gradient())), fn.__name__


@pytest.mark.parametrize(
    "name,ref,lo,hi",
    [
        ("sqrt", np.sqrt, 0.0, 100.0),
        ("erf", special.erf, -4, 4),
        ("sin", np.sin, -10, 10),
        ("cos", np.cos, -10, 10),
        ("tan", np.tan, -1.5, 1.5),
        ("asin", np.arcsin, -1, 1),
        ("acos", np.arccos, -1, 1),
        ("atan", np.arctan, -50, 50),
        ("sinh", np.sinh, -20, 20),
        ("cosh", np.cosh, -20, 20),
        ("asinh", np.arcsinh, -50, 50),
        ("acosh", np.arccosh, 1, 50),
        ("atanh", np.arctanh, -0.999, 0.999),
        ("lgamma", special.gammaln, 0.01, 50),
        ("log_sigmoid", lambda v: -np.logaddexp(0, -v), -50, 50),
        ("selu", lambda v: 1.0507009873554805 * np.where(v > 0, v, 1.6732632423543772 * np.expm1(v)), -5, 5),
    ],
)
def test_float32_accuracy(name, ref, lo, hi):
    a = np.linspace(lo, hi, 2001).astype(np.float32)
    y = getattr(dy, name)(dy.inputVector(a)).npvalue()
    want = ref(a.astype(np.float64))
    # a few float32 ulps (libm's float functions are within about 2)
    np.testing.assert_allclose(y, want, rtol=5e-7, atol=1e-7)


def test_lgamma_gradient_is_digamma(float64):
    a = np.array([0.05, 0.5, 1.0, 1.5, 2.0, 3.7, 9.99, 10.0, 25.0, 1e4, -0.5, -2.3])
    x = dy.inputVector(a)
    y = dy.lgamma(x)
    dy.sum_elems(y).backward(full=True)
    np.testing.assert_allclose(y.npvalue(), special.gammaln(a), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(x.gradient(), special.digamma(a), rtol=1e-11, atol=1e-12)


def test_domain_edges():
    y = dy.sqrt(dy.inputVector([0.0, -1.0])).npvalue()
    assert y[0] == 0.0 and np.isnan(y[1])
    assert np.isnan(dy.acosh(dy.inputVector([0.5])).npvalue()[0])
    v = dy.atanh(dy.inputVector([1.0, -1.0])).npvalue()
    assert v[0] == np.inf and v[1] == -np.inf
    assert dy.abs(dy.inputVector([-0.0, -3.0])).npvalue().tolist() == [0.0, 3.0]


def test_emin_is_documented_as_dyn_only():
    assert "DyNet" in dy.emin.__doc__ and "no emin" in dy.emin.__doc__
