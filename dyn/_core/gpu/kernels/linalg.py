"""GPU kernels of the linear-algebra family (the CPU's: dyn/_core/cpu/linalg.pyx): colwise_add,
contract3d_1d(_bias), contract3d_1d_1d(_bias), inverse/logdet, trace_of_product,
circ_conv/circ_corr, kmh_ngram and to_device.

inverse and logdet factor in double as the CPU does (LU with partial pivoting, one vectorised step
per column: a singular matrix gives inf/NaN, never an exception, unlike numpy.linalg.inv).
"""
import numpy as np

from dyn._core.gpu.device import register
from dyn._core.gpu.kernels._util import copy_fwd, identity_bwd
from dyn._core.gpu.kernels._util import quiet as _quiet

INVERSE, LOGDET = 0, 1        # inverse_logdet, ia[0] (dyn/_core/ops/linalg.pxd)
CONV, CORR = 0, 1             # circ_conv_corr, ia[0]



# ---------------------------------------------------------------- colwise_add


def _cwa(v):
    m = v.dims[0]
    v.y[...] = v.x(0) + v.x(1).reshape(m, 1, -1, order="F")


def _cwa_bwd(v, i):
    gy = v.gy
    v.acc(i, gy if i == 0 else gy.sum(axis=1))


register("colwise_add", _cwa, _cwa_bwd)

# ------------------------------------------------------ contract3d_1d(_bias): z_ij = sum_k x_ijk y_k (+ b_ij)


def _c31_parts(v):
    NI, J, K = v.arg_dims(0)
    IJ, B = NI * J, v.bd
    X = v.x(0).reshape(IJ, K, -1, order="F")          # (IJ, K, xb)
    Y = v.x(1).reshape(K, -1, order="F")              # (K, yb)
    return IJ, K, B, X, Y


def _c31(v):
    xp = v.xp
    IJ, K, B, X, Y = _c31_parts(v)
    y = v.y.reshape(IJ, B, order="F")
    if X.shape[-1] == 1:
        out = X[:, :, 0] @ Y                          # x shared: one product with all the y columns
    else:
        out = xp.einsum("pkb,kb->pb", X, xp.broadcast_to(Y, (K, B)))
    if v.nargs == 3:
        out = out + v.x(2).reshape(IJ, -1, order="F")
    y[...] = out


def _c31_bwd(v, i):
    xp = v.xp
    if i == 2:
        v.acc(2, v.gy)
        return
    IJ, K, B, X, Y = _c31_parts(v)
    G = v.gy.reshape(IJ, B, order="F")
    Yb = xp.broadcast_to(Y, (K, B))
    if i == 0:
        if X.shape[-1] == 1:
            d = G @ Yb.T                              # summed over the batch by the product
        else:
            d = G[:, None, :] * Yb[None, :, :]
    else:
        if X.shape[-1] == 1:
            d = X[:, :, 0].T @ G
        else:
            d = xp.einsum("pkb,pb->kb", X, G)
    v.acc(i, d)


register("contract3d_1d", _c31, _c31_bwd)

# ------------------------------------------------ contract3d_1d_1d(_bias): t_i = sum_jk x_ijk y_k z_j (+ b_i)
# aux: x.y (I x J), kept for z's gradient, as the CPU's


def _c311(v):
    NI, J, K = v.arg_dims(0)
    X = v.x(0).reshape(NI * J, K, order="F")
    xy = v.aux((2 * NI * J,))[:NI * J].reshape(NI, J, order="F")
    xy[...] = (X @ v.x(1).reshape(K, order="F")).reshape(NI, J, order="F")
    t = xy @ v.x(2).reshape(J, order="F")
    if v.nargs == 4:
        t = t + v.x(3).reshape(NI, order="F")
    v.y.reshape(NI, order="F")[...] = t


def _c311_bwd(v, i):
    NI, J, K = v.arg_dims(0)
    gy = v.gy.reshape(NI, order="F")
    if i == 3:
        v.acc(3, gy)
        return
    if i == 2:
        xy = v.aux((2 * NI * J,))[:NI * J].reshape(NI, J, order="F")
        v.acc(2, xy.T @ gy)
        return
    u = gy[:, None] * v.x(2).reshape(J, order="F")[None, :]     # dt z^T (I x J)
    if i == 0:
        d = u[:, :, None] * v.x(1).reshape(K, order="F")[None, None, :]
    else:
        d = u.reshape(NI * J, order="F") @ v.x(0).reshape(NI * J, K, order="F")
    v.acc(i, d)


register("contract3d_1d_1d", _c311, _c311_bwd)

# ---------------------------------------------------------------- inverse, logdet


def _lu(xp, a):
    """P a = L U in double (a copy): (lu, perm), the CPU's partial pivoting. The loop is over the
    columns (one vectorised elimination step each): a host loop of m steps, no synchronisation."""
    m = a.shape[0]
    a = a.astype(np.float64)          # a copy, in double
    perm = xp.arange(m)
    ar = xp.arange(m)
    for k in range(m):
        p = k + xp.argmax(xp.abs(a[k:, k]))
        rows = xp.where(ar == k, p, xp.where(ar == p, k, ar))    # swap rows k and p
        a = a[rows]
        perm = perm[rows]
        piv = a[k, k]
        # a zero pivot: the column below is zero too (it was the largest), nothing to eliminate
        low = a[k + 1:, k] / xp.where(piv == 0, 1.0, piv)
        a[k + 1:, k] = low
        a[k + 1:, k + 1:] -= low[:, None] * a[k, k + 1:][None, :]
    return a, perm


def _lu_inverse(xp, lu, perm):
    """A^-1 = U^-1 L^-1 P from the factors (forward and back substitution, a step per column)."""
    m = lu.shape[0]
    y = xp.eye(m, dtype=np.float64)[perm]
    for j in range(m):
        y[j + 1:] -= lu[j + 1:, j][:, None] * y[j][None, :]
    for j in range(m - 1, -1, -1):
        y[j] /= lu[j, j]
        y[:j] -= lu[:j, j][:, None] * y[j][None, :]
    return y


def _square(v):
    xp = v.xp
    m = v.arg_dims(0)[0]
    a = v.x(0).reshape(m, m, order="F")
    with _quiet(xp):
        lu, perm = _lu(xp, a)
        if v.ia[0] == LOGDET:
            v.y.reshape(())[...] = xp.sum(xp.log(xp.abs(xp.diagonal(lu))))
        else:
            v.y.reshape(m, m, order="F")[...] = _lu_inverse(xp, lu, perm)


def _square_bwd(v, i):
    xp = v.xp
    m = v.arg_dims(0)[0]
    if v.ia[0] == LOGDET:              # d log|det A| / dA = A^-T
        with _quiet(xp):
            lu, perm = _lu(xp, v.x(0).reshape(m, m, order="F"))
            inv = _lu_inverse(xp, lu, perm)
        v.acc(0, v.gy.reshape(()) * inv.T)
        return
    y = v.y.reshape(m, m, order="F")   # Y = A^-1: dA -= Y^T G Y^T
    v.acc(0, -(y.T @ (v.gy.reshape(m, m, order="F") @ y.T)))


register("inverse_logdet", _square, _square_bwd)

# ---------------------------------------------------------------- trace_of_product: sum_ij x_ij y_ij


def _top(v):
    v.y.reshape(())[...] = v.xp.sum(v.x(0) * v.x(1))


def _top_bwd(v, i):
    v.acc(i, v.gy.reshape(()) * v.x(1 - i))


register("trace_of_product", _top, _top_bwd)

# ------------------------------------------------- circ_conv, circ_corr (direct O(n^2), in double as the CPU)


def _circ_index(m, sign_i, sign_k):
    """Host table J[r, c] = (sign_k * r + sign_i * c) mod m."""
    r = np.arange(m)[:, None]
    c = np.arange(m)[None, :]
    return (sign_k * r + sign_i * c) % m


def _vec(v, i):
    return v.x(i).reshape(-1, order="F").astype(np.float64)


def _circ(v):
    xp = v.xp
    a, b = _vec(v, 0), _vec(v, 1)
    m = a.shape[0]
    # CONV: y_k = sum_i a_i b_(k-i); CORR: y_k = sum_i a_i b_(i+k)
    J = _circ_index(m, -1, 1) if v.ia[0] == CONV else _circ_index(m, 1, 1)
    v.y.reshape(m, order="F")[...] = b[xp.asarray(J)] @ a


def _circ_bwd(v, i):
    xp = v.xp
    u, w = _vec(v, 0), _vec(v, 1)
    m = u.shape[0]
    g = v.gy.reshape(m, order="F").astype(np.float64)
    src = w if i == 0 else u
    if v.ia[0] == CONV:            # du_i = sum_k g_k v_(k-i); dv_i = sum_k g_k u_(k-i)
        J = _circ_index(m, 1, -1)
    elif i == 0:                   # corr: du_i = sum_k g_k v_(i+k)
        J = _circ_index(m, 1, 1)
    else:                          # corr: dv_i = sum_k g_k u_(i-k)
        J = _circ_index(m, -1, 1)
    v.acc(i, src[xp.asarray(J)] @ g)


register("circ_conv_corr", _circ, _circ_bwd)

# -------------------------------------------------------------- kmh_ngram: column j = sum of columns j..j+n-1
# (a host loop over the n-gram's width, small; the CPU's order of the sums)


def _kmh(v):
    x, y = v.x(0), v.y
    oc, ng = v.dims[1], v.ia[0]
    y[...] = x[:, 0:oc]
    for k in range(1, ng):
        y += x[:, k:k + oc]


def _kmh_bwd(v, i):
    gy = v.gy
    oc, ng = v.dims[1], v.ia[0]
    d = v.xp.zeros(v.arg_shape(0), dtype=v.dtype)
    for k in range(ng):
        d[:, k:k + oc] += gy
    v.acc(0, d)


register("kmh_ngram", _kmh, _kmh_bwd)

# --------------------------------------------------------- to_device (the argument is on this device: a copy)


register("to_device", copy_fwd, identity_bwd)
