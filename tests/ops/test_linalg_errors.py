"""Bad arguments to the linear-algebra and fused LSTM ops raise at creation,
naming the op, and leave the graph usable; plus what the generated tests
cannot see: gradients of inverse/logdet on well-conditioned matrices, the
LSTM gates with batched x/h/masks against shared (unbatched) weights, several
concatenated inputs, and weight noise."""

import numpy as np
import pytest

import dyn as dy
from dyn._core.core import graph as _graph
from dyn.ops._registry import REGISTRY

from . import _harness as H


def _still_usable(n_before):
    assert _graph.num_nodes() == n_before, "a failed call left a node behind"
    x = dy.inputTensor(np.eye(2))
    assert dy.logdet(x).scalar_value() == pytest.approx(0.0)


def _raises(exc, match, fn, *args, **kwargs):
    n = _graph.num_nodes()
    with pytest.raises(exc, match=match):
        fn(*args, **kwargs)
    _still_usable(n)


def _t(shape, batch=1, seed=0):
    a = np.random.RandomState(seed).uniform(-1, 1, size=tuple(shape) + ((batch,) if batch > 1 else ()))
    return dy.inputTensor(a, batched=batch > 1)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "name,nargs",
    [
        ("colwise_add", 2),
        ("contract3d_1d", 2),
        ("contract3d_1d_bias", 3),
        ("contract3d_1d_1d", 3),
        ("contract3d_1d_1d_bias", 4),
        ("inverse", 1),
        ("logdet", 1),
        ("trace_of_product", 2),
        ("circ_conv", 2),
        ("circ_corr", 2),
        ("vanilla_lstm_c", 2),
        ("vanilla_lstm_h", 2),
    ],
)
def test_rejects_non_expressions(name, nargs):
    args = [_t((2, 2)) for _ in range(nargs)]
    args[-1] = np.ones(2)
    _raises(TypeError, name, getattr(dy, name), *args)


def test_colwise_add_errors():
    m, v = _t((3, 4)), _t((3,))
    _raises(ValueError, r"colwise_add: .*\{3\} and \{3\}", dy.colwise_add, v, v)
    _raises(ValueError, r"colwise_add: .*\{3,4\} and \{2\}", dy.colwise_add, m, _t((2,)))
    _raises(ValueError, r"colwise_add: .*\{3,4\} and \{3,2\}", dy.colwise_add, m, _t((3, 2)))
    _raises(ValueError, "colwise_add: batch sizes differ", dy.colwise_add, _t((3, 4), 2), _t((3,), 3))


def test_contract_errors():
    x, y = _t((2, 3, 4)), _t((4,))
    _raises(ValueError, r"contract3d_1d: .*\{2,3\} and \{4\}", dy.contract3d_1d, _t((2, 3)), y)
    _raises(ValueError, r"contract3d_1d: .*\{2,3,4\} and \{3\}", dy.contract3d_1d, x, _t((3,)))
    _raises(ValueError, "contract3d_1d: batch sizes differ", dy.contract3d_1d, _t((2, 3, 4), 2), _t((4,), 3))
    _raises(
        ValueError, r"contract3d_1d_bias: the bias must be \{2,3\}", dy.contract3d_1d_bias, x, y, _t((3, 2))
    )
    z = _t((3,))
    _raises(ValueError, "contract3d_1d_1d: x must be", dy.contract3d_1d_1d, x, y, _t((4,)))
    _raises(ValueError, "contract3d_1d_1d: x must be", dy.contract3d_1d_1d, x, _t((3,)), z)
    _raises(ValueError, "contract3d_1d_1d: batched arguments", dy.contract3d_1d_1d, x, _t((4,), 2), z)
    _raises(
        ValueError,
        r"contract3d_1d_1d_bias: the bias must be a vector \{2\}",
        dy.contract3d_1d_1d_bias,
        x,
        y,
        z,
        _t((3,)),
    )


def test_square_matrix_errors():
    for fn, name in ((dy.inverse, "inverse"), (dy.logdet, "logdet")):
        _raises(ValueError, r"%s: x must be a square matrix, got \{2,3\}" % name, fn, _t((2, 3)))
        _raises(ValueError, r"%s: x must be a square matrix, got \{2,2,2\}" % name, fn, _t((2, 2, 2)))
        _raises(ValueError, "%s: batched arguments are not supported" % name, fn, _t((2, 2), 3))
    _raises(
        ValueError,
        "trace_of_product: x and y must have the same dimensions",
        dy.trace_of_product,
        _t((2, 3)),
        _t((3, 2)),
    )
    _raises(ValueError, "trace_of_product: batched", dy.trace_of_product, _t((2, 3), 2), _t((2, 3)))


def test_circular_and_ngram_errors():
    for fn, name in ((dy.circ_conv, "circ_conv"), (dy.circ_corr, "circ_corr")):
        _raises(ValueError, "%s: u and v must be vectors of the same size" % name, fn, _t((3,)), _t((4,)))
        _raises(ValueError, "%s: u and v must be vectors" % name, fn, _t((3, 2)), _t((3, 2)))
        _raises(ValueError, "%s: batched" % name, fn, _t((3,), 2), _t((3,), 2))
    x = _t((3, 4))
    _raises(ValueError, r"kmh_ngram: .*at least n = 5 columns, got \{3,4\}", dy.kmh_ngram, x, 5)
    _raises(ValueError, "kmh_ngram: n must be a positive integer", dy.kmh_ngram, x, 0)
    _raises(TypeError, "kmh_ngram: n must be an integer", dy.kmh_ngram, x, 1.5)
    _raises(ValueError, r"kmh_ngram: x must be a matrix", dy.kmh_ngram, _t((4,)), 1)
    _raises(ValueError, "kmh_ngram: batched", dy.kmh_ngram, _t((3, 4), 2), 2)
    _raises(TypeError, "kmh_ngram", dy.kmh_ngram, np.ones((3, 4)), 2)


def test_to_device():
    x = _t((3, 2), 2)
    _raises(ValueError, "to_device: .*one GPU", dy.to_device, x, "GPU:1")
    _raises(ValueError, "to_device: .*'CUDA:1' is not a device name", dy.to_device, x, "cuda:1")
    _raises(ValueError, "to_device: .*'TPU' is not a device name", dy.to_device, x, "TPU")
    _raises(TypeError, "to_device: device_str must be a string", dy.to_device, x, 0)
    _raises(TypeError, "to_device", dy.to_device, np.ones(2), "CPU")
    y = dy.to_device(x, "CPU")
    np.testing.assert_array_equal(y.npvalue(), x.npvalue())
    assert y.dim() == x.dim()


def _gate_args(n_in=3, hid=2, seed=0):
    shapes = [(n_in,), (hid,), (4 * hid, n_in), (4 * hid, hid), (4 * hid,)]
    return [_t(shape, 1, seed + k) for k, shape in enumerate(shapes)]


def test_lstm_gates_errors():
    x, h, Wx, Wh, b = _gate_args()
    f = dy.vanilla_lstm_gates
    _raises(ValueError, r"vanilla_lstm_gates: Wx must be \{8,3\}.*got \{8,2\}", f, x, h, Wh, Wh, b)
    _raises(ValueError, r"vanilla_lstm_gates: Wh must be \{8,2\}.*got \{8,3\}", f, x, h, Wx, Wx, b)
    _raises(ValueError, r"vanilla_lstm_gates: b must be \{8\}.*got \{6\}", f, x, h, Wx, Wh, _t((6,)))
    _raises(ValueError, r"vanilla_lstm_gates: x_t must be a vector, got \{3,2\}", f, _t((3, 2)), h, Wx, Wh, b)
    _raises(ValueError, r"vanilla_lstm_gates: h_tm1 must be a vector", f, x, _t((2, 2)), Wx, Wh, b)
    _raises(ValueError, "vanilla_lstm_gates: Wx must not be batched", f, x, h, _t((8, 3), 2), Wh, b)
    _raises(ValueError, "vanilla_lstm_gates: b must not be batched", f, x, h, Wx, Wh, _t((8,), 2))
    _raises(ValueError, "vanilla_lstm_gates: batch sizes differ", f, _t((3,), 2), _t((2,), 3), Wx, Wh, b)
    # finite: an infinite spread made NaN weights, so ">= 0" alone would misstate the rule
    for bad in (-0.1, float("inf"), float("nan")):
        msg = "^vanilla_lstm_gates: weightnoise_std must be a finite number >= 0, got %r$" % bad
        _raises(ValueError, msg, f, x, h, Wx, Wh, b, bad)
    _raises(TypeError, "vanilla_lstm_gates: weightnoise_std must be a number", f, x, h, Wx, Wh, b, "a")
    _raises(TypeError, "vanilla_lstm_gates: weightnoise_std must be a number", f, x, h, Wx, Wh, b, True)
    _raises(TypeError, "vanilla_lstm_gates: expected an Expression", f, x, h, Wx, np.ones((8, 2)), b)
    fc = dy.vanilla_lstm_gates_concat
    _raises(ValueError, "vanilla_lstm_gates_concat: x_t_list is empty", fc, [], h, Wx, Wh, b)
    _raises(TypeError, "vanilla_lstm_gates_concat: x_t_list must be a list", fc, 3, h, Wx, Wh, b)
    _raises(ValueError, r"vanilla_lstm_gates_concat: Wx must be \{8,4\}", fc, [x, _t((1,))], h, Wx, Wh, b)
    _raises(
        ValueError, r"vanilla_lstm_gates_concat: x_t\[1\] must be a vector", fc, [x, _t((1, 2))], h, Wx, Wh, b
    )
    _raises(
        ValueError,
        "vanilla_lstm_gates_concat: the x_t have different batch sizes",
        fc,
        [_t((1,), 2), _t((2,))],
        h,
        Wx,
        Wh,
        b,
    )
    fd = dy.vanilla_lstm_gates_dropout
    _raises(
        ValueError,
        r"vanilla_lstm_gates_dropout: dropout_mask_x must be a vector \{3\}",
        fd,
        x,
        h,
        Wx,
        Wh,
        b,
        _t((2,)),
        _t((2,)),
    )
    _raises(
        ValueError,
        r"vanilla_lstm_gates_dropout: dropout_mask_h must be a vector \{2\}",
        fd,
        x,
        h,
        Wx,
        Wh,
        b,
        _t((3,)),
        _t((3,)),
    )
    _raises(
        ValueError,
        "vanilla_lstm_gates_dropout: dropout_mask_h must have batch size 1 or 2",
        fd,
        _t((3,), 2),
        h,
        Wx,
        Wh,
        b,
        _t((3,)),
        _t((2,), 3),
    )
    _raises(
        TypeError,
        "vanilla_lstm_gates_dropout_concat",
        dy.vanilla_lstm_gates_dropout_concat,
        [x],
        h,
        Wx,
        Wh,
        b,
        _t((3,)),
        None,
    )


def test_lstm_c_h_errors():
    for fn, name in ((dy.vanilla_lstm_c, "vanilla_lstm_c"), (dy.vanilla_lstm_h, "vanilla_lstm_h")):
        _raises(ValueError, r"%s: .*vector \{4H\}, got \{3\}, \{8\}" % name, fn, _t((3,)), _t((8,)))
        _raises(ValueError, "%s: .*same batch size" % name, fn, _t((2,), 2), _t((8,)))
        _raises(ValueError, "%s: .*vector" % name, fn, _t((2, 2)), _t((16,)))


# ---------------------------------------------------------------- inverse and logdet gradients


def _fd_check(fn, arrays, seed=5, rtol=1e-6, atol=1e-8):
    xs = [dy.inputTensor(a, reusable_expr=True) for a in arrays]
    loss = H.loss_of(fn(*xs), seed=seed)
    loss.backward(full=True)
    for x, a in zip(xs, arrays):
        np.testing.assert_allclose(x.gradient(), H.numeric_grad(x, a, loss), rtol=rtol, atol=atol)


def _spd(n, seed):
    a = np.random.RandomState(seed).uniform(-1, 1, size=(n, n))
    return a @ a.T + n * np.eye(n)


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_inverse_logdet_gradients(n, float64):
    rng = np.random.RandomState(n)
    general = rng.uniform(-1, 1, size=(n, n)) + 2 * np.eye(n) * np.sign(rng.uniform(-1, 1, size=n))
    for a in (_spd(n, n), general):
        assert np.linalg.cond(a) < 50
        _fd_check(dy.inverse, [a])
        _fd_check(dy.logdet, [a])
        np.testing.assert_allclose(
            dy.inverse(dy.inputTensor(a)).npvalue(), np.linalg.inv(a).reshape(n, n), rtol=1e-10, atol=1e-12
        )
        assert dy.logdet(dy.inputTensor(a)).scalar_value() == pytest.approx(
            np.linalg.slogdet(a)[1], rel=1e-12
        )


def test_inverse_logdet_float32_and_pivoting():
    # a zero leading entry needs a row exchange; a negative determinant gives log|det|
    a = np.array([[0.0, 2.0, 1.0], [1.0, 0.0, 0.0], [3.0, 1.0, 4.0]])
    np.testing.assert_allclose(
        dy.inverse(dy.inputTensor(a)).npvalue(), np.linalg.inv(a), rtol=1e-5, atol=1e-6
    )
    assert np.linalg.det(a) < 0
    assert dy.logdet(dy.inputTensor(a)).scalar_value() == pytest.approx(
        np.log(abs(np.linalg.det(a))), rel=1e-5
    )


def test_singular_matrix_does_not_crash():
    s = dy.inputTensor(np.ones((2, 2)))
    assert not np.all(np.isfinite(dy.inverse(s).npvalue()))
    assert dy.logdet(s).scalar_value() == -np.inf


# ---------------------------------------------------------------- fused LSTM with batches


def _sig(a):
    return 1 / (1 + np.exp(-a))


def _gates_np(xs, h, Wx, Wh, b, mx=None, mh=None):
    x = np.concatenate([v.reshape(-1) for v in xs])
    if mx is not None:
        x, h = x * mx, h * mh
    a = Wx @ x + Wh @ h + b
    n = h.shape[0]
    a[n : 2 * n] += 1
    return np.concatenate([_sig(a[: 3 * n]), np.tanh(a[3 * n :])])


def _col(a, bd, k):
    return a[..., k] if bd > 1 else a


@pytest.mark.parametrize("drop", [False, True])
@pytest.mark.parametrize(
    "sizes,bx,bh,bm",
    [
        ([3], 3, 3, (3, 3)),
        ([3], 3, 1, (1, 3)),
        ([3], 1, 3, (3, 1)),
        ([2, 1, 3], 2, 2, (1, 1)),
        ([2, 2], 1, 1, (1, 1)),
        ([2, 2], 2, 1, (2, 2)),
    ],
)
def test_lstm_gates_batched_value_and_gradient(sizes, bx, bh, bm, drop, float64):
    hid, n_in = 2, sum(sizes)
    B = max(bx, bh, *(bm if drop else (1,)))
    rng = np.random.RandomState(len(sizes) + 10 * bx + bh)
    arrays = [rng.uniform(-1, 1, size=(s,) + ((bx,) if bx > 1 else ())) for s in sizes]
    arrays += [
        rng.uniform(-1, 1, size=(hid,) + ((bh,) if bh > 1 else ())),
        rng.uniform(-1, 1, size=(4 * hid, n_in)),
        rng.uniform(-1, 1, size=(4 * hid, hid)),
        rng.uniform(-1, 1, size=(4 * hid,)),
    ]
    bds = [bx] * len(sizes) + [bh, 1, 1, 1]
    if drop:
        arrays += [
            rng.uniform(0.5, 2, size=(n_in,) + ((bm[0],) if bm[0] > 1 else ())),
            rng.uniform(0.5, 2, size=(hid,) + ((bm[1],) if bm[1] > 1 else ())),
        ]
        bds += list(bm)
    xs = [dy.inputTensor(a, batched=bd > 1, reusable_expr=True) for a, bd in zip(arrays, bds)]
    m = len(sizes)
    rest = xs[m : m + 4] + (xs[m + 4 :] if drop else [])
    if drop:
        y = dy.vanilla_lstm_gates_dropout_concat(xs[:m], *rest)
    elif m > 1:
        y = dy.vanilla_lstm_gates_concat(xs[:m], *rest)
    else:
        y = dy.vanilla_lstm_gates(xs[0], *rest)
    assert y.dim() == ((4 * hid,), B)
    got = H.per_example(y.npvalue(), B)
    for k in range(B):
        cols = [_col(a, bd, k) for a, bd in zip(arrays, bds)]
        want = _gates_np(cols[:m], *cols[m : m + 4], *(cols[m + 4 :] if drop else []))
        np.testing.assert_allclose(got[:, k], want, rtol=1e-12, atol=1e-12)
    loss = H.loss_of(y, seed=3)
    loss.backward(full=True)
    for i, (x, a) in enumerate(zip(xs, arrays)):
        np.testing.assert_allclose(
            x.gradient(), H.numeric_grad(x, a, loss), rtol=1e-6, atol=1e-8, err_msg="input %d" % i
        )


def test_lstm_step_matches_numpy(float64):
    """gates -> c -> h, batched, against a plain numpy LSTM step."""
    hid, n_in, B = 3, 4, 2
    rng = np.random.RandomState(0)
    x, h, c = rng.uniform(-1, 1, (n_in, B)), rng.uniform(-1, 1, (hid, B)), rng.uniform(-1, 1, (hid, B))
    Wx, Wh, b = (
        rng.uniform(-1, 1, (4 * hid, n_in)),
        rng.uniform(-1, 1, (4 * hid, hid)),
        rng.uniform(-1, 1, 4 * hid),
    )
    g = dy.vanilla_lstm_gates(
        dy.inputTensor(x, batched=True),
        dy.inputTensor(h, batched=True),
        dy.inputTensor(Wx),
        dy.inputTensor(Wh),
        dy.inputTensor(b),
    )
    c_t = dy.vanilla_lstm_c(dy.inputTensor(c, batched=True), g)
    h_t = dy.vanilla_lstm_h(c_t, g)
    for k in range(B):
        a = Wx @ x[:, k] + Wh @ h[:, k] + b
        i, f, o, u = (
            _sig(a[:hid]),
            _sig(a[hid : 2 * hid] + 1),
            _sig(a[2 * hid : 3 * hid]),
            np.tanh(a[3 * hid :]),
        )
        want_c = f * c[:, k] + i * u
        np.testing.assert_allclose(c_t.npvalue()[:, k], want_c, rtol=1e-12)
        np.testing.assert_allclose(h_t.npvalue()[:, k], o * np.tanh(want_c), rtol=1e-12)


def test_lstm_gates_float32_close_to_float64():
    args = [
        np.random.RandomState(s).uniform(-2, 2, size=shape)
        for s, shape in enumerate([(5, 3), (4, 3), (16, 5), (16, 4), (16,)])
    ]

    def run():
        dy.renew_cg()
        xs = [dy.inputTensor(a, batched=k < 2) for k, a in enumerate(args)]
        return dy.vanilla_lstm_gates(*xs).npvalue()

    y32 = run()
    dy.set_precision("float64")
    try:
        y64 = run()
    finally:
        dy.set_precision("float32")
    np.testing.assert_allclose(y32, y64, rtol=1e-5, atol=1e-6)


def test_lstm_gates_weight_noise(float64):
    hid, n_in = 2, 3
    rng = np.random.RandomState(1)
    arrays = [
        rng.uniform(-1, 1, (n_in,)),
        rng.uniform(-1, 1, (hid,)),
        rng.uniform(-1, 1, (4 * hid, n_in)),
        rng.uniform(-1, 1, (4 * hid, hid)),
        rng.uniform(-1, 1, (4 * hid,)),
    ]
    xs = [dy.inputTensor(a, reusable_expr=True) for a in arrays]
    sd = 0.05
    y = dy.vanilla_lstm_gates(*xs, weightnoise_std=sd)
    clean = _gates_np([arrays[0]], *arrays[1:])
    # pre-activations of i, f, o (logit of the output) over many fresh draws
    samples = np.array([y.npvalue(recalculate=True) for _ in range(2000)])
    logits = np.log(samples[:, : 3 * hid] / (1 - samples[:, : 3 * hid]))
    want_mean = np.log(clean[: 3 * hid] / (1 - clean[: 3 * hid]))
    want_sd = sd * np.sqrt(np.sum(arrays[0] ** 2) + np.sum(arrays[1] ** 2) + 1)
    np.testing.assert_allclose(logits.mean(axis=0), want_mean, atol=4 * want_sd / np.sqrt(2000))
    np.testing.assert_allclose(logits.std(axis=0), want_sd, rtol=0.1)
    # with the same draw at every evaluation, backward matches finite differences
    loss = H.loss_of(y, seed=4)
    dy.reset_random_seed(7)
    loss.forward(recalculate=True)
    loss.backward(full=True)
    grads = [x.gradient() for x in xs]
    for x, a, grad in zip(xs, arrays, grads):
        flat = a.ravel(order="F").copy()
        num = np.zeros_like(flat)
        for j in range(flat.size):
            vals = []
            for e in (1e-6, -1e-6):
                flat[j] += e
                x.set(flat)
                dy.reset_random_seed(7)
                vals.append(loss.scalar_value(recalculate=True))
                flat[j] -= e
            num[j] = (vals[0] - vals[1]) / 2e-6
        x.set(flat)
        np.testing.assert_allclose(grad, num.reshape(a.shape, order="F"), rtol=1e-5, atol=1e-7)


def _value_and_grads(spec, case, arrays, bds):
    dy.renew_cg()
    xs, y = H.build(spec, case, arrays, bds)
    H.loss_of(y, seed=2).backward(full=True)
    return [y.npvalue()] + [x.gradient() for x in xs]


# the linalg family and the fused vanilla LSTM nodes (family rnn), whose errors are checked here too
@pytest.mark.parametrize(
    "name", sorted(n for n, s in REGISTRY.items() if s.family == "linalg" or n.startswith("vanilla_lstm"))
)
def test_float32_kernels_match_float64(name):
    """The generated tests run float64; the float32 instantiations agree with it."""
    spec = REGISTRY[name]
    for ci, case in enumerate(spec.cases):
        mode = ("all", None) if "all" in case.batches else ("none", None)
        arrays, bds = H.make_arrays(spec, case, mode, seed=ci)
        if name in ("inverse", "logdet"):
            arrays = [_spd(a.shape[0], ci) for a in arrays]
        got32 = _value_and_grads(spec, case, arrays, bds)
        dy.set_precision("float64")
        try:
            got64 = _value_and_grads(spec, case, arrays, bds)
        finally:
            dy.set_precision("float32")
        for a, b in zip(got32, got64):
            np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5, err_msg="%s case %d" % (name, ci))
