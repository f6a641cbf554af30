"""GPU kernels of the sparse probability maps (sparsemax, sparsemax_loss, constrained_softmax),
normalisation (layer_norm, weight_norm) and the gradient-flow ops (gradient_scale, argmax); the
CPU's: dyn/_core/cpu/loss_norm.pyx. Each batch element is separate and an argument of batch 1 is
shared (its gradient summed over the batch, through v.acc). The per-column searches of the CPU
(sparsemax's sorted threshold, constrained_softmax's growing clipped set) are vectorised over the
columns with a sort along axis 0; thresholds are computed in float64 as the CPU's."""
import numpy as np

from dyn._core.gpu.device import register
from dyn._core.gpu.kernels._util import copy_fwd
from dyn._core.gpu.kernels._util import quiet as _quiet

LN_EPS = 1e-8        # layer_norm: g (x - mean) / (std + LN_EPS) + b
F64 = np.float64


def _cols(v, a):
    """a (a vector per batch element) as (m, its batch)."""
    return a.reshape((-1, a.shape[-1]), order="F")

# ---------------------------------------------------------------- sparsemax, sparsemax_loss


def _tau(xp, x):
    """Threshold of sparsemax for each column of x (m, B), in float64 (Martins & Astudillo 2016):
    the support is the longest prefix of the values sorted down with 1 + k z_k > sum_{j<=k} z_j."""
    m = x.shape[0]
    z = -xp.sort(-x, axis=0).astype(F64)
    cs = xp.cumsum(z, axis=0)
    k = xp.arange(1, m + 1, dtype=F64)[:, None]
    cond = 1 + k * z > cs
    # the prefix: no failed test at or before k
    pref = xp.cumsum((~cond).astype(np.int32), axis=0) == 0
    npref = xp.sum(pref, axis=0)
    at = xp.maximum(npref - 1, 0)[None, :]
    keep = xp.where(npref > 0, xp.take_along_axis(cs, at, axis=0)[0], 0)
    tau = (keep - 1) / xp.maximum(npref, 1)
    # NaN: every output depends on tau
    return xp.where(xp.any(x != x, axis=0), xp.nan, tau)


def _sparsemax(v):
    xp = v.xp
    x = _cols(v, v.x(0))
    with _quiet(xp):
        t = x - _tau(xp, x).astype(v.dtype)
    v.y[...] = xp.where(t <= 0, 0, t).reshape(v.shape, order="F")      # tau NaN: y NaN


def _sparsemax_bwd(v, i):
    # on the support S (y > 0): gx = gy - mean_S(gy); elsewhere 0
    xp = v.xp
    y, gy = _cols(v, v.y), _cols(v, v.gy)
    s = y > 0
    cnt = xp.sum(s, axis=0)
    acc = xp.sum(xp.where(s, gy, 0), axis=0)
    mean = xp.where(cnt > 0, acc / xp.maximum(cnt, 1), 0).astype(v.dtype)
    d = xp.where(s, gy - mean, xp.where(y != y, y, 0))     # NaN input: NaN gradient
    v.acc(0, d)


register("sparsemax", _sparsemax, _sparsemax_bwd)


def _spmloss(v):
    # L = -q.z + 1/2 sum_{j in S} (z_j^2 - tau^2) + 1/2 |q|^2, q uniform on the targets
    xp = v.xp
    x = _cols(v, v.x(0))
    m, B = x.shape
    vs = v.idx()
    with _quiet(xp):
        tau = _tau(xp, x)
        t = x.astype(F64) - tau
        act = ~(t <= 0)           # t NaN (NaN input): p, the loss and the gradient are NaN
        # the aux: sort scratch (m B items), then sparsemax(x) for backward
        p = v.aux((m, 2 * B))[:, B:]
        p[...] = xp.where(act, t, 0)
        loss = 0.5 * xp.sum(xp.where(act, t * (x + tau), 0), axis=0) + 0.5 * v.fa[0]
        loss = loss - xp.sum(x[xp.asarray(vs.astype(np.int64))].astype(F64), axis=0) / len(vs)
    # the loss is >= 0; a negative value is rounding (DyNet clips it too)
    v.y[...] = xp.where(loss <= 0, 0, loss).reshape(v.shape, order="F")


def _spmloss_bwd(v, i):
    # dL/dz = sparsemax(z) - q
    xp = v.xp
    m = v.arg_dims(0)[0]
    B = v.bd
    vs = v.idx()
    p = v.aux((m, 2 * B))[:, B:]
    q = np.bincount(vs, minlength=m).astype(np.float64) / len(vs)      # host: the index list
    c = v.gy.reshape((1, B), order="F")
    v.acc(0, c * p - c * xp.asarray(q.astype(v.dtype))[:, None])


register("sparsemax_loss", _spmloss, _spmloss_bwd)

# ---------------------------------------------------------------- constrained_softmax


def _csm(v):
    # p = argmin KL(p || softmax(x)) s.t. p <= u, sum p = 1 (Martins & Kreutzer 2017): p_i = u_i
    # on the clipped set A, e_i (1 - U_A) / E_notA elsewhere. As the CPU: A grows from {} by every
    # entry that violates its bound for the current A, until none does (at most m rounds), every
    # column at once; the rounds stop when no column changed (one flag read back per round: the
    # number of rounds is the data's). This is also the CPU's answer where no p satisfies the
    # bounds (negative u, sum u < 1).
    xp = v.xp
    m, B = v.dims[0], v.bd
    x = xp.broadcast_to(_cols(v, v.x(0)), (m, B))
    u = xp.broadcast_to(_cols(v, v.x(1)), (m, B))
    with _quiet(xp):
        x64 = x.astype(F64)
        e64 = xp.exp(x64 - xp.max(x64, axis=0)).astype(v.dtype).astype(F64)   # the CPU's py
        u64 = u.astype(F64)
        A = xp.zeros((m, B), dtype=bool)
        s = xp.zeros(B, dtype=F64)
        live = xp.ones(B, dtype=bool)
        for _ in range(m + 1):
            U = xp.where(A, u64, 0.0).sum(axis=0)
            E = xp.where(A, 0.0, e64).sum(axis=0)
            go = live & ~(E <= 0)                    # (a NaN E goes on, as the CPU's test)
            s = xp.where(go, (1 - U) / xp.where(go, E, 1.0), s)
            viol = go[None, :] & ~A & (e64 * s > u64)
            live = go & viol.any(axis=0)
            A |= viol
            if not bool(live.any()):
                break
        mk = v.aux((m, B))
        mk[...] = A
        v.y[...] = xp.where(A, u, (e64 * s).astype(v.dtype)).reshape(v.shape, order="F")


def _csm_bwd(v, i):
    # r = sum_{notA} gy_i p_i / sum_{notA} p_i; gx_j = p_j (gy_j - r) off A, gu_j = gy_j - r on A
    xp = v.xp
    m, B = v.dims[0], v.bd
    p, gy = _cols(v, v.y), _cols(v, v.gy)
    a = v.aux((m, B)) != 0
    with _quiet(xp):
        S = xp.sum(xp.where(a, 0, p).astype(F64), axis=0)
        R = xp.sum(xp.where(a, 0, gy.astype(F64) * p), axis=0)
        r = xp.where(S > 0, R / xp.where(S > 0, S, 1), 0).astype(v.dtype)
        if i == 0:
            d = xp.where(a, 0, p * (gy - r))
        else:
            # a NaN in x: which bounds are active depends on it
            d = xp.where(S != S, S.astype(v.dtype), xp.where(a, gy - r, 0))
    v.acc(i, d)


register("constrained_softmax", _csm, _csm_bwd)

# ---------------------------------------------------------------- layer_norm


def _moments(xp, x):
    """Mean and population standard deviation of each column of x (s, B), in float64."""
    x = x.astype(F64)
    mu = xp.mean(x, axis=0, keepdims=True)
    c = x - mu
    return c, mu, xp.sqrt(xp.mean(c * c, axis=0, keepdims=True))


def _ln(v):
    xp = v.xp
    x, g, b = _cols(v, v.x(0)), _cols(v, v.x(1)), _cols(v, v.x(2))
    with _quiet(xp):
        c, mu, sd = _moments(xp, x)
        inv = 1.0 / (sd + LN_EPS)
        y = g * (c * inv) + b
    v.y[...] = y.astype(v.dtype).reshape(v.shape, order="F")


def _ln_bwd(v, i):
    # x: gx_j = (h_j - mean h) inv - (x_j - mu) inv^2 sum_i h_i (x_i - mu) / (N sd), h = g gy
    xp = v.xp
    gy = _cols(v, v.gy)
    if i == 2:
        v.acc(2, gy)
        return
    x = _cols(v, v.x(0))
    s = x.shape[0]
    with _quiet(xp):
        c, mu, sd = _moments(xp, x)
        inv = 1.0 / (sd + LN_EPS)
        if i == 1:
            v.acc(1, gy * c * inv)
            return
        h = _cols(v, v.x(1)).astype(F64) * gy
        sh = xp.mean(h, axis=0, keepdims=True)
        # sd = 0 (all equal): x - mu is 0 too, so the second term vanishes
        k = xp.sum(h * c, axis=0, keepdims=True)
        k = xp.where(sd > 0, k * inv * inv / (s * xp.where(sd > 0, sd, 1)), 0)
        v.acc(0, (h - sh) * inv - c * k)


register("layer_norm", _ln, _ln_bwd)

# ---------------------------------------------------------------- weight_norm


def _wn_parts(v):
    xp = v.xp
    w = _cols(v, v.x(0))
    g = _cols(v, v.x(1)).astype(F64)
    w64 = w.astype(F64)
    nrm = xp.sqrt(xp.sum(w64 * w64, axis=0, keepdims=True))
    ok = nrm != 0                  # w = 0 has no direction; a NaN in w makes |w| NaN
    return w64, g, nrm, ok, xp.where(ok, nrm, 1)


def _wn(v):
    xp = v.xp
    with _quiet(xp):
        w, g, nrm, ok, safe = _wn_parts(v)
        sc = xp.where(ok, g / safe, 0)
        v.y[...] = (sc * w).astype(v.dtype).reshape(v.shape, order="F")


def _wn_bwd(v, i):
    # gw = (g / |w|) (gy - w (gy.w) / |w|^2); gg = gy.w / |w|
    xp = v.xp
    gy = _cols(v, v.gy)
    with _quiet(xp):
        w, g, nrm, ok, safe = _wn_parts(v)
        d = xp.sum(gy * w, axis=0, keepdims=True)
        if i == 1:
            v.acc(1, xp.where(ok, d / safe, 0))
            return
        gv = g / safe
        d = d / (safe * safe)
        v.acc(0, xp.where(ok, gv * (gy - w * d), 0))


register("weight_norm", _wn, _wn_bwd)

# ---------------------------------------------------------------- gradient_scale (flip/scale_gradient)


def _scaled_bwd(v, i):
    v.acc(0, v.fa[0] * v.gy)


register("gradient_scale", copy_fwd, _scaled_bwd)

# ---------------------------------------------------------------- argmax


def _argmax(v):
    # ties go to the first maximum, and a NaN is the maximum (the first NaN wins), as the CPU and
    # numpy.argmax; first indices as min reductions (no reliance on argmax's tie rule)
    xp = v.xp
    x = _cols(v, v.x(0))
    m = x.shape[0]
    ar = xp.arange(m)[:, None]
    nan = x != x
    mx = xp.max(xp.where(nan, -xp.inf, x), axis=0, keepdims=True)
    first_max = xp.min(xp.where(x == mx, ar, m), axis=0)
    first_nan = xp.min(xp.where(nan, ar, m), axis=0)
    k = xp.where(first_nan < m, first_nan, first_max)
    v.y[...] = (ar == k[None, :]).astype(v.dtype).reshape(v.shape, order="F")


def _argmax_bwd(v, i):
    # zero_gradient: nothing (reached only by backward(full=True));
    # straight_through_gradient: the gradient passes as through the identity
    if v.ia[0]:
        v.acc(0, v.gy)


register("argmax", _argmax, _argmax_bwd)
