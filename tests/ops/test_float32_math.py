"""float32 tanh/logistic use vectorised approximations (dyn/_core/cpu/_fastmath.h):
check them against float64 references over the whole float range."""

import numpy as np

import dyn as dy


def _grid():
    x = np.concatenate(
        [
            np.linspace(-30, 30, 60001),
            [-1e30, -1e4, -100, -88.7, 88.7, 100, 1e4, 1e30],
            np.geomspace(1e-8, 1e-2, 50),
            -np.geomspace(1e-8, 1e-2, 50),
            [0.0],
        ]
    )
    return x.astype(np.float32)


def test_tanh_float32_accuracy():
    x = _grid()
    y = dy.tanh(dy.inputVector(x)).npvalue()
    want = np.tanh(x.astype(np.float64))
    assert np.all(np.abs(y - want) <= 4e-7 * np.maximum(np.abs(want), 1e-30) + 1e-37)


def test_logistic_float32_accuracy():
    x = _grid()
    y = dy.logistic(dy.inputVector(x)).npvalue()
    with np.errstate(over="ignore"):  # exp(1e30) = inf is the right limit here
        want = 1 / (1 + np.exp(-x.astype(np.float64)))
    assert np.all(np.abs(y - want) <= 4e-7 * want + 1e-37)


def test_special_values_float32():
    x = np.array([np.inf, -np.inf, np.nan], dtype=np.float32)
    t = dy.tanh(dy.inputVector(x)).npvalue()
    s = dy.logistic(dy.inputVector(x)).npvalue()
    assert t[0] == 1.0 and t[1] == -1.0 and np.isnan(t[2])
    assert s[0] == 1.0 and s[1] == 0.0 and np.isnan(s[2])


def _pnls_reference(x, v):
    x = x.astype(np.float64)
    mx = x.max(axis=0)
    lse = mx + np.log(np.exp(x - mx).sum(axis=0))
    p = np.exp(x - lse)
    p[v, np.arange(x.shape[1])] -= 1
    return lse - x[v, np.arange(x.shape[1])], p


def test_pickneglogsoftmax_batch_float32_accuracy():
    """The float32 loss keeps max and log-sum per element and recomputes the softmax in
    backward: value and gradient against float64, small to very large logits."""
    rng = np.random.RandomState(0)
    for scale in (0.01, 1.0, 30.0, 1000.0):
        x = (rng.randn(5000, 6) * scale).astype(np.float32)
        v = list(rng.randint(0, 5000, 6))
        m = dy.ParameterCollection()
        X = m.add_parameters((5000, 6), init=x.astype(np.float64))
        dy.renew_cg()
        cols = dy.concatenate_to_batch([dy.pick(dy.parameter(X), j, 1) for j in range(6)])
        loss = dy.pickneglogsoftmax_batch(cols, v)
        dy.sum_batches(loss).backward()
        want, grad = _pnls_reference(x, v)
        np.testing.assert_allclose(loss.npvalue().ravel(), want, rtol=1e-6, atol=1e-5)
        np.testing.assert_allclose(X.grad_as_array(), grad, rtol=0, atol=2e-6)


def test_pickneglogsoftmax_float32_minus_infinity():
    x = np.array([0.0, -np.inf, 1.0, -100.0], dtype=np.float32)
    want = np.log(1 + np.exp(1.0) + np.exp(-100.0))
    assert abs(dy.pickneglogsoftmax(dy.inputVector(x), 0).scalar_value() - want) < 1e-6


def test_affine_transform_batched_bias_gradient_float32():
    """One bias for a batch of columns: its gradient is summed in one pass (dyn/_core/cpu/_fastmath.h)."""
    rng = np.random.RandomState(1)
    for rows, batch in ((7, 1), (9, 5), (300, 13)):
        m = dy.ParameterCollection()
        W, b = m.add_parameters((rows, 4)), m.add_parameters(rows)
        x, r = rng.randn(4, batch).astype(np.float32), rng.randn(rows, batch).astype(np.float32)
        dy.renew_cg()
        y = dy.affine_transform([dy.parameter(b), dy.parameter(W), dy.inputTensor(x, batched=True)])
        dy.sum_batches(dy.dot_product(y, dy.inputTensor(r, batched=True))).backward()
        np.testing.assert_allclose(b.grad_as_array(), r.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_affine_transform_bias_broadcast_with_streaming_stores():
    """A large float32 output takes its bias with streaming stores (dyn_bcast_cols_f32); forced
    on small shapes here, with column lengths that leave columns off 16-byte alignment, the values
    and gradients equal those of the ordinary broadcast exactly, and numpy's."""
    from dyn._core.cpu import arith

    rng = np.random.RandomState(2)
    for rows, batch in ((1, 3), (3, 7), (4, 5), (1001, 9), (37, 1)):
        m = dy.ParameterCollection()
        W, b = m.add_parameters((rows, 6)), m.add_parameters(rows)
        x, r = rng.randn(6, batch).astype(np.float32), rng.randn(rows, batch).astype(np.float32)
        got = []
        for nbytes in (1 << 62, 0):
            old = arith._set_bcast_stream_bytes(nbytes)
            try:
                dy.renew_cg()
                y = dy.affine_transform([dy.parameter(b), dy.parameter(W), dy.inputTensor(x, batched=True)])
                dy.sum_batches(dy.dot_product(y, dy.inputTensor(r, batched=True))).backward()
                v = y.npvalue().reshape(rows, batch)
                got.append((v, W.grad_as_array().copy(), b.grad_as_array().copy()))
            finally:
                arith._set_bcast_stream_bytes(old)
            W.scale_gradient(0.0)
            b.scale_gradient(0.0)
        for a, c in zip(got[0], got[1]):
            assert np.array_equal(a, c)
        want = W.as_array() @ x + b.as_array()[:, None]
        np.testing.assert_allclose(got[1][0], want, rtol=1e-5, atol=1e-5)


def test_pickneglogsoftmax_float32_exp_over_its_range(device):
    """The softmax's exp of shifted arguments (x - max <= 0, dyn_expf_neg): the gradient of every
    element against float64, from e^0 down past the float range (where it must be 0), both where
    backward adds into a zeroed gradient and where it writes one it has alone."""
    from dyn._core.core import graph

    x = np.concatenate([np.linspace(-95.0, 0.0, 190001), -np.geomspace(1e-8, 1.0, 200), [-np.inf]])
    x = x.astype(np.float32)
    want_p = np.exp(x.astype(np.float64) - np.log(np.exp(x.astype(np.float64)).sum()))
    want_p[0] -= 1
    for fresh_min in (10**12, 1):
        old = graph._set_fresh_min(fresh_min)
        try:
            m = dy.ParameterCollection()
            X = m.add_parameters(len(x), init=np.nan_to_num(x, neginf=-1e30).astype(np.float64))
            dy.renew_cg()
            # through a node of its own: a parameter's gradient is the pool's, never fresh; and
            # only the CPU's kernel writes a fresh gradient
            dy.pickneglogsoftmax(1.0 * dy.parameter(X), 0).backward()
            assert graph._last_fresh() == (fresh_min == 1 and device == "CPU")
        finally:
            graph._set_fresh_min(old)
        g = X.grad_as_array()
        big = np.abs(want_p) > 1e-30
        # float32 rounds the argument (x - max) - log-sum in two steps, up to an ulp of |x - lse|, which e^
        # turns into a relative error of that size (about 8e-6 at e^-69)
        tol = (4e-7 + 1.2e-7 * np.abs(np.log(np.abs(want_p[big])))) * np.abs(want_p[big])
        assert np.all(np.abs(g[big] - want_p[big]) <= tol)
        assert np.all(np.abs(g[~big]) <= 1e-30)
