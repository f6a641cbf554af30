"""conv2d, conv2d_bias, maxpooling2d, filter1d_narrow: what the generated tests
do not cover (float32, DyNet's output sizes, larger batched problems, the
scratch reuse across backward calls, parameters, training) and their errors."""

import numpy as np
import pytest

import dyn as dy
from dyn._core.core import graph as _graph
from dyn.ops import conv as C


def _t(a, batched=False):
    return dy.inputTensor(a, batched=batched, reusable_expr=True)


def _ref_batched(fn, *arrays, bds, **kw):
    """Reference over a trailing batch axis (batch-1 arrays are shared)."""
    B = max(bds)
    outs = [fn(*[a[..., b] if bd > 1 else a for a, bd in zip(arrays, bds)], **kw) for b in range(B)]
    return np.stack(outs, axis=-1) if B > 1 else outs[0]


# ---------------------------------------------------------------- output sizes


@pytest.mark.parametrize(
    "xs,fs,stride,valid,out",
    [
        ((5, 5, 1), (2, 2, 1, 4), [1, 1], True, (4, 4, 4)),
        ((5, 5, 1), (2, 2, 1, 4), [2, 2], True, (2, 2, 4)),  # ceil(4 / 2)
        ((5, 5, 1), (2, 2, 1, 4), [2, 2], False, (3, 3, 4)),  # ceil(5 / 2)
        ((7, 6, 3), (3, 3, 3, 2), [3, 2], True, (2, 2, 2)),  # ceil(5/3), ceil(4/2)
        ((7, 6, 3), (3, 3, 3, 2), [3, 2], False, (3, 3, 2)),
        ((4, 4), (4, 4, 1, 1), [1, 1], True, (1, 1, 1)),
        ((2, 3), (5, 4, 1, 1), [1, 1], False, (2, 3, 1)),  # SAME allows a filter larger than x
    ],
)
def test_conv_output_dims_as_dynet(xs, fs, stride, valid, out):
    y = dy.conv2d(dy.zeros(xs), dy.zeros(fs), stride, is_valid=valid)
    assert y.dim() == (out, 1)


def test_conv_single_channel_matches_hand_computation(float64):
    x = np.arange(16.0).reshape(4, 4)
    f = np.array([[1.0, 0.0], [0.0, -1.0]]).reshape(2, 2, 1, 1)
    y = dy.conv2d(dy.inputTensor(x), dy.inputTensor(f), [1, 1]).npvalue()
    # cross-correlation: y[i, j] = x[i, j] - x[i+1, j+1] = -5 everywhere
    np.testing.assert_array_equal(y.reshape(3, 3), np.full((3, 3), -5.0))


def test_conv_same_padding_is_tensorflow_split(float64):
    # 4 wide, filter 3, stride 2 -> out 2, total pad (2-1)*2+3-4 = 1: 0 before, 1 after
    x = np.arange(1.0, 5.0).reshape(1, 4)
    f = np.ones((1, 3, 1, 1))
    y = dy.conv2d(dy.inputTensor(x), dy.inputTensor(f), [1, 2], is_valid=False).npvalue()
    np.testing.assert_array_equal(y.reshape(-1), [1 + 2 + 3, 3 + 4])


# ---------------------------------------------------------------- float32 and larger batched problems


@pytest.mark.parametrize("valid", [True, False])
def test_conv_float32_batched_large(valid):
    rng = np.random.RandomState(0)
    x = rng.uniform(-1, 1, size=(12, 11, 3, 8))
    f = rng.uniform(-1, 1, size=(3, 4, 3, 5))
    b = rng.uniform(-1, 1, size=5)
    y = dy.conv2d_bias(_t(x, True), _t(f), _t(b), [2, 1], is_valid=valid)
    want = _ref_batched(C._conv_ref, x, f, b=b, stride=[2, 1], is_valid=valid, bds=[8, 1])
    assert y.dim()[1] == 8
    np.testing.assert_allclose(y.npvalue(), want, rtol=1e-4, atol=1e-4)


def test_pool_and_filter1d_float32():
    rng = np.random.RandomState(1)
    x = rng.uniform(-1, 1, size=(6, 7, 2, 3))
    y = dy.maxpooling2d(_t(x, True), [2, 3], [2, 2], is_valid=False)
    want = _ref_batched(C._pool_ref, x, ksize=[2, 3], stride=[2, 2], is_valid=False, bds=[3])
    np.testing.assert_allclose(y.npvalue(), want, rtol=1e-6)
    s = rng.uniform(-1, 1, size=(4, 9))
    f = rng.uniform(-1, 1, size=(4, 3, 5))
    np.testing.assert_allclose(
        dy.filter1d_narrow(_t(s), _t(f)).npvalue(), C._f1d_ref(s, f), rtol=1e-5, atol=1e-5
    )


def test_conv_batched_equals_loop_with_batched_filter_and_bias(float64):
    rng = np.random.RandomState(2)
    x = rng.uniform(-1, 1, size=(5, 6, 2))  # shared by the batch
    f = rng.uniform(-1, 1, size=(2, 3, 2, 3, 4))  # one filter per batch element
    b = rng.uniform(-1, 1, size=(3, 4))
    y = dy.conv2d_bias(_t(x), _t(f, True), _t(b, True), [1, 2], is_valid=False).npvalue()
    for k in range(4):
        dy.renew_cg()
        yk = dy.conv2d_bias(_t(x), _t(f[..., k]), _t(b[:, k]), [1, 2], is_valid=False).npvalue()
        np.testing.assert_allclose(y[..., k], yk, rtol=1e-12, atol=1e-12)


def test_conv_bias_batched_alone_broadcasts_the_convolution(float64):
    rng = np.random.RandomState(3)
    x, f, b = rng.uniform(-1, 1, (4, 4, 1)), rng.uniform(-1, 1, (2, 2, 1, 2)), rng.uniform(-1, 1, (2, 3))
    xe, fe, be = _t(x), _t(f), _t(b, True)
    y = dy.conv2d_bias(xe, fe, be, [1, 1])
    want = _ref_batched(lambda x, f, b: C._conv_ref(x, f, [1, 1], b=b), x, f, b, bds=[1, 1, 3])
    np.testing.assert_allclose(y.npvalue(), want, rtol=1e-12)
    dy.sum_batches(dy.sum_elems(y)).backward(full=True)
    gx, gf, gb = xe.gradient(), fe.gradient(), be.gradient()
    # every batch element's convolution is the same: x and f get 3 times one element's gradient
    dy.renew_cg()
    x1, f1 = _t(x), _t(f)
    dy.sum_elems(dy.conv2d(x1, f1, [1, 1])).backward(full=True)
    np.testing.assert_allclose(gx, 3 * x1.gradient(), rtol=1e-12)
    np.testing.assert_allclose(gf, 3 * f1.gradient(), rtol=1e-12)
    np.testing.assert_allclose(gb, np.full((2, 3), 9.0))


# ---------------------------------------------------------------- backward details


def _conv_model(batch=2):
    m = dy.ParameterCollection()
    F = m.add_parameters((3, 3, 2, 4), init=dy.NormalInitializer(0, 0.5))
    b = m.add_parameters((4,), init=dy.ConstInitializer(0.1))
    rng = np.random.RandomState(5)
    x = rng.uniform(-1, 1, size=(6, 6, 2, batch))
    return m, F, b, x


def test_conv_parameter_gradients_accumulate_over_two_backward_calls(float64):
    # x's backward overwrites the im2col scratch; the filter's must rebuild it
    m, F, b, x = _conv_model()
    xe = _t(x, True)
    loss = dy.sum_batches(dy.sum_elems(dy.tanh(dy.conv2d_bias(xe, F, b, [1, 1], is_valid=False))))
    loss.backward(full=True)
    g1, gb1, gx1 = F.grad_as_array().copy(), b.grad_as_array().copy(), xe.gradient()
    loss.backward(full=True)
    np.testing.assert_allclose(F.grad_as_array(), 2 * g1, rtol=1e-12)
    np.testing.assert_allclose(b.grad_as_array(), 2 * gb1, rtol=1e-12)
    np.testing.assert_allclose(xe.gradient(), gx1, rtol=1e-12)


@pytest.mark.parametrize("batched_filter", [False, True])
def test_conv_backward_passes_with_different_live_arguments(batched_filter, float64):
    # full=True: x's backward also takes dF (before reusing the scratch for dCol);
    # full=False: only the filter is live and must rebuild the scratch first
    rng = np.random.RandomState(7)
    x = rng.uniform(-1, 1, size=(5, 6, 2, 3))
    f = rng.uniform(-1, 1, size=(2, 3, 2, 4) + ((3,) if batched_filter else ()))
    m = dy.ParameterCollection()
    b = m.add_parameters((4,), init=dy.ConstInitializer(0.0))
    xe, fe = _t(x, True), _t(f, batched_filter)
    r = dy.inputTensor(rng.uniform(-1, 1, size=(5, 6, 4, 3)), batched=True)
    y = dy.conv2d_bias(xe, fe, b, [1, 1], is_valid=False)
    loss = dy.sum_batches(dy.sum_elems(dy.cmult(y, r)))
    loss.backward(full=True)
    gf, gx = fe.gradient(), xe.gradient()
    loss.backward()  # x and f are inputs: only b is live
    loss.backward(full=True)
    np.testing.assert_allclose(fe.gradient(), gf, rtol=1e-12)
    np.testing.assert_allclose(xe.gradient(), gx, rtol=1e-12)
    np.testing.assert_allclose(b.grad_as_array(), 3 * r.npvalue().sum(axis=(0, 1, 3)), rtol=1e-12)
    dy.renew_cg()
    # the filter alone live (a parameter), after a pass that used both
    F = m.add_parameters(f.shape[:4], init=dy.NumpyInitializer(f[..., 0] if batched_filter else f))
    xe = _t(x, True)
    y = dy.conv2d(xe, F, [2, 1])
    loss = dy.sum_batches(dy.squared_norm(y))
    loss.backward(full=True)
    g_once = F.grad_as_array().copy()
    loss.backward()
    np.testing.assert_allclose(F.grad_as_array(), 2 * g_once, rtol=1e-12)


def test_conv_filter_gradient_matches_check_grad(float64):
    m, F, b, x = _conv_model(batch=3)

    def loss():
        xe = dy.inputTensor(x, batched=True)
        h = dy.maxpooling2d(dy.rectify(dy.conv2d_bias(xe, F, b, [1, 1])), [2, 2], [2, 2])
        return dy.sum_batches(dy.squared_norm(h))

    assert dy.check_grad(loss, [F, b], eps=1e-6, rtol=1e-5, atol=1e-7) == []


def test_conv_learns_an_edge_detector(float64):
    rng = np.random.RandomState(0)
    target = rng.uniform(-1, 1, size=(3, 3, 1, 1))
    m = dy.ParameterCollection()
    F = m.add_parameters((3, 3, 1, 1), init=dy.ConstInitializer(0.0))
    trainer = dy.SimpleSGDTrainer(m, learning_rate=0.05)
    xs = rng.uniform(-1, 1, size=(8, 8, 1, 16))
    ys = _ref_batched(C._conv_ref, xs, target, stride=[1, 1], bds=[16, 1])
    losses = []
    for _ in range(60):
        dy.renew_cg()
        y = dy.conv2d(dy.inputTensor(xs, batched=True), F, [1, 1])
        loss = dy.sum_batches(dy.squared_distance(y, dy.inputTensor(ys, batched=True))) * (1 / 16)
        losses.append(loss.scalar_value())
        loss.backward()
        trainer.update()
    assert losses[-1] < 1e-3 * losses[0]
    np.testing.assert_allclose(F.as_array().reshape(3, 3), target.reshape(3, 3), atol=1e-2)


def test_maxpool_gradient_goes_to_the_max(float64):
    x = np.array([[1.0, 5.0, 2.0, 0.0], [3.0, 4.0, 7.0, 6.0]])
    xe = _t(x)
    y = dy.maxpooling2d(xe, [2, 2], [2, 2])
    np.testing.assert_array_equal(y.npvalue().reshape(-1), [5.0, 7.0])
    dy.sum_elems(y).backward(full=True)
    np.testing.assert_array_equal(xe.gradient(), [[0, 1, 0, 0], [0, 0, 1, 0]])


def test_filter1d_narrow_dims_and_single_filter(float64):
    x = dy.inputTensor(np.ones((3, 7)))
    assert dy.filter1d_narrow(x, dy.inputTensor(np.ones((3, 2, 4)))).dim() == ((4, 6), 1)
    y = dy.filter1d_narrow(x, dy.inputTensor(np.ones((3, 7))))
    assert y.dim() == ((1, 1), 1)
    assert y.scalar_value() == 21.0


def test_no_conv1d_in_the_python_api():
    # DyNet's Python module has no conv1d_* (C++ only); kmax_pooling/fold_rows live elsewhere
    assert not hasattr(dy, "conv1d_narrow") and not hasattr(dy, "conv1d_wide")


# ---------------------------------------------------------------- errors


def _raises(exc, match, fn, *args, **kwargs):
    n = _graph.num_nodes()
    with pytest.raises(exc, match=match):
        fn(*args, **kwargs)
    assert _graph.num_nodes() == n, "a failed call left a node behind"
    y = dy.conv2d(dy.ones((3, 3)), dy.ones((2, 2, 1, 1)), [1, 1])  # the graph still works
    assert y.npvalue().sum() == pytest.approx(16.0)


def test_conv2d_errors():
    x = dy.zeros((5, 5, 2))
    f = dy.zeros((3, 3, 2, 4))
    _raises(
        ValueError, r"conv2d: .*same Ci.*\{5,5,2\}, \{3,3,3,4\}", dy.conv2d, x, dy.zeros((3, 3, 3, 4)), [1, 1]
    )
    _raises(ValueError, r"conv2d: .*FH x FW x Ci x Co", dy.conv2d, x, dy.zeros((3, 3, 2)), [1, 1])
    _raises(ValueError, r"conv2d: x must be H x W", dy.conv2d, dy.zeros((5,)), f, [1, 1])
    _raises(ValueError, r"conv2d: x must be H x W", dy.conv2d, dy.zeros((5, 5, 2, 2)), f, [1, 1])
    _raises(ValueError, r"conv2d: in VALID .*larger", dy.conv2d, dy.zeros((2, 5, 2)), f, [1, 1])
    _raises(ValueError, r"conv2d: stride must have two", dy.conv2d, x, f, [1, 1, 1])
    _raises(ValueError, r"conv2d: stride must be positive", dy.conv2d, x, f, [0, 1])
    _raises(ValueError, r"conv2d: stride must be positive", dy.conv2d, x, f, [1, -2])
    _raises(TypeError, r"conv2d: stride must be integers", dy.conv2d, x, f, [1.5, 1])
    _raises(TypeError, r"conv2d: stride must be a list", dy.conv2d, x, f, 1)
    _raises(TypeError, r"conv2d", dy.conv2d, np.zeros((5, 5, 2)), f, [1, 1])
    _raises(TypeError, r"conv2d", dy.conv2d, x, "f", [1, 1])
    xb = dy.zeros((5, 5, 2), batch_size=2)
    fb = dy.zeros((3, 3, 2, 4), batch_size=3)
    _raises(ValueError, r"conv2d: batch sizes differ", dy.conv2d, xb, fb, [1, 1])


def test_conv2d_bias_errors():
    x = dy.zeros((5, 5, 2))
    f = dy.zeros((3, 3, 2, 4))
    _raises(
        ValueError,
        r"conv2d_bias: the bias must be a vector of Co = 4",
        dy.conv2d_bias,
        x,
        f,
        dy.zeros(3),
        [1, 1],
    )
    _raises(ValueError, r"conv2d_bias: the bias", dy.conv2d_bias, x, f, dy.zeros((4, 1)), [1, 1])
    _raises(TypeError, r"conv2d_bias", dy.conv2d_bias, x, f, [0.0] * 4, [1, 1])
    _raises(
        ValueError,
        r"conv2d_bias: batch sizes differ",
        dy.conv2d_bias,
        dy.zeros((5, 5, 2), batch_size=3),
        f,
        dy.zeros(4, batch_size=2),
        [1, 1],
    )


def test_maxpooling2d_errors():
    x = dy.zeros((4, 4, 2))
    _raises(ValueError, r"maxpooling2d: x must be H x W", dy.maxpooling2d, dy.zeros(4), [2, 2], [1, 1])
    _raises(ValueError, r"maxpooling2d: in VALID .*\(5, 2\)", dy.maxpooling2d, x, [5, 2], [1, 1])
    _raises(ValueError, r"maxpooling2d: ksize must have two", dy.maxpooling2d, x, [2], [1, 1])
    _raises(ValueError, r"maxpooling2d: stride must be positive", dy.maxpooling2d, x, [2, 2], [0, 0])
    _raises(TypeError, r"maxpooling2d", dy.maxpooling2d, np.zeros((4, 4)), [2, 2], [1, 1])


def test_filter1d_narrow_errors():
    x = dy.zeros((3, 5))
    _raises(ValueError, r"filter1d_narrow: .*\{3,5\}, \{2,2\}", dy.filter1d_narrow, x, dy.zeros((2, 2)))
    _raises(ValueError, r"filter1d_narrow: .*d <= s", dy.filter1d_narrow, x, dy.zeros((3, 6)))
    _raises(ValueError, r"filter1d_narrow", dy.filter1d_narrow, dy.zeros((3, 5, 2)), dy.zeros((3, 2)))
    _raises(ValueError, r"filter1d_narrow", dy.filter1d_narrow, x, dy.zeros((3, 2, 2, 2)))
    _raises(
        ValueError,
        r"filter1d_narrow: batch sizes differ",
        dy.filter1d_narrow,
        dy.zeros((3, 5), batch_size=2),
        dy.zeros((3, 2), batch_size=3),
    )
    _raises(TypeError, r"filter1d_narrow", dy.filter1d_narrow, x, None)
