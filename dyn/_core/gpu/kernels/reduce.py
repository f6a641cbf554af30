"""GPU kernels of the reduce family (declared in dyn/_core/ops/reduce.pyx; the CPU's:
dyn/_core/cpu/reduce.pyx): reductions and moments, cumulative sums, fold_rows and k-max pooling.

One kernel pair serves every reduction: the input is seen as 8 axes (7 dims and the batch) and
the axes in the node's mask (ia[1]; fold_rows: the rows split as (nrows, rows / nrows), the first
reduced) are reduced with keepdims, which reshapes to the node's value. Sums accumulate in double
for float32 and float64, as the CPU's. Backward recomputes what it needs (the mean, the arg max)
from the argument's value instead of reading the node's scratch."""
import math

from dyn._core.gpu.device import register
from dyn._core.gpu.kernels._util import ext as _ext
from dyn._core.gpu.kernels._util import quiet as _quiet

K_SUM, K_POW, K_STD, K_MAX, K_MIN, K_LSE = range(6)


def _plan(v):
    """(x8, axes, keep, N): the argument as 8 (fold_rows: 9) axes, the reduced axes, the shape
    with those axes set to 1 (the node's value's, keepdims) and the number of inputs per output."""
    xd = v.arg_dims(0)
    if _is_fold(v):
        m = v.ia[4]
        ext = (m, xd[0] // m) + _ext(xd)[1:] + (v.arg_bd(0),)
        axes = (0,)
    else:
        ext = _ext(xd) + (v.arg_bd(0),)
        mask = v.ia[1]
        axes = tuple(k for k in range(8) if (mask >> k) & 1)
    keep = tuple(1 if k in axes else e for k, e in enumerate(ext))
    return v.x(0).reshape(ext, order="F"), axes, keep, math.prod(ext[k] for k in axes)


_FOLD = []


def _is_fold(v):
    if not _FOLD:
        from dyn._core.core import graph
        _FOLD.append(graph.op_code("fold_rows"))
    return v.op == _FOLD[0]


def _scale(v, N):
    if v.ia[5]:
        return 1.0 / (v.fa[0] if v.fa[0] > 0 else N)
    return 1.0


def _argext(xp, x8, axes, mn):
    """The arg max (min) over the reduced axes, counted in storage order over them (the first
    wins ties; a NaN is the extreme: the first NaN wins), with the moved array: (xr, a), xr of
    shape kept + (R,) and a of shape kept."""
    kept = [k for k in range(x8.ndim) if k not in axes]
    xt = xp.transpose(x8, kept + list(axes))
    ks = tuple(x8.shape[k] for k in kept)
    xr = xt.reshape(ks + (-1,), order="F")
    a = xp.argmin(xr, axis=-1) if mn else xp.argmax(xr, axis=-1)
    return xr, a, kept


def _red(v):
    xp = v.xp
    kind = v.ia[0]
    x8, axes, keep, N = _plan(v)
    y = v.y.reshape(keep, order="F")
    f64 = xp.float64
    if kind in (K_MAX, K_MIN, K_LSE):
        xr, a, kept = _argext(xp, x8, axes, kind == K_MIN)
        m = xp.take_along_axis(xr, a[..., None], axis=-1)      # kept + (1,)
        ks = tuple(x8.shape[k] for k in kept)
        m = m.reshape(ks, order="F").reshape(keep, order="F")
        if kind != K_LSE:
            y[...] = m
            return
        # log sum exp(x) = c + log sum exp(x - c), c the max (0 if all -inf)
        c = xp.where(m == -xp.inf, 0, m).astype(f64)
        with _quiet(xp):
            s = xp.exp(x8 - c).sum(axis=axes, keepdims=True)
            y[...] = c + xp.log(s)
        return
    with _quiet(xp):
        if kind == K_STD:
            mean = x8.sum(axis=axes, dtype=f64, keepdims=True) / N
            dev = x8 - mean
            y[...] = xp.sqrt((dev * dev).sum(axis=axes, keepdims=True) / N)
            return
        if kind == K_POW:
            s = (x8.astype(f64) ** v.ia[4]).sum(axis=axes, keepdims=True)
        else:
            s = x8.sum(axis=axes, dtype=f64, keepdims=True)
        y[...] = s * _scale(v, N)


def _red_bwd(v, i):
    xp = v.xp
    kind = v.ia[0]
    x8, axes, keep, N = _plan(v)
    gy = v.gy.reshape(keep, order="F")
    if kind in (K_MAX, K_MIN):
        xr, a, kept = _argext(xp, x8, axes, kind == K_MIN)
        ks = tuple(x8.shape[k] for k in kept)
        g = gy.reshape(ks + (1,), order="F")
        R = xr.shape[-1]
        dr = xp.where(xp.arange(R) == a[..., None], g, 0).astype(v.dtype)
        red_shape = tuple(x8.shape[k] for k in axes)
        dt = dr.reshape(ks + red_shape, order="F")
        perm = kept + list(axes)
        inv = [0] * len(perm)
        for j, q in enumerate(perm):
            inv[q] = j
        v.acc(0, xp.transpose(dt, inv))
        return
    with _quiet(xp):
        if kind == K_LSE:
            y = v.y.reshape(keep, order="F")
            d = gy * xp.exp(x8 - y)
        elif kind == K_STD:
            # dy/dx = (x - mean) / (N y); a zero deviation has no slope
            y = v.y.reshape(keep, order="F")
            mean = x8.sum(axis=axes, dtype=xp.float64, keepdims=True) / N
            c = xp.where(y != 0, gy / (N * y.astype(xp.float64)), 0)
            d = c * (x8 - mean)
        elif kind == K_POW:
            r = v.ia[4]
            d = gy * _scale(v, N) * r * (x8.astype(xp.float64) ** (r - 1))
        else:
            d = xp.broadcast_to(gy * v.dtype(_scale(v, N)), x8.shape)
    v.acc(0, d)


for _op in ("sum_dim", "mean_dim", "std_dim", "moment_dim", "mean_elems", "std_elems",
            "moment_elems", "mean_batches", "std_batches", "moment_batches", "max_dim", "min_dim",
            "logsumexp_dim", "fold_rows"):
    register(_op, _red, _red_bwd)

# ---------------------------------------------------------------- along one dim: cumsum, kmax_pooling
# ia[0] = d, ia[1] = k (kmax_pooling). Arrays are dims + (batch,): dim d is axis d.


def _cumsum(v):
    v.y[...] = v.xp.cumsum(v.x(0), axis=v.ia[0], dtype=v.xp.float64)


def _cumsum_bwd(v, i):
    # gx_l = sum_{l' >= l} gy_l': the cumulative sum of gy from the end
    xp, d = v.xp, v.ia[0]
    v.acc(0, xp.flip(xp.cumsum(xp.flip(v.gy, axis=d), axis=d, dtype=xp.float64), axis=d))


register("cumsum", _cumsum, _cumsum_bwd)


def _argsort(xp, a):
    # stable on both (cupy's argsort is always stable and takes no other kind)
    if xp.__name__ == "numpy":
        return xp.argsort(a, axis=-1, kind="stable")
    return xp.argsort(a, axis=-1)


def _kmax_sel(v):
    """Per slice along d: the input indices of the k largest values (NaN the largest, a later
    index losing ties), in their original order: shape dims + (batch,) with d last."""
    xp, d, k = v.xp, v.ia[0], v.ia[1]
    xs = xp.moveaxis(v.x(0), d, -1)
    nan = xp.isnan(xs)
    # by value, descending, ties by index (stable); then the NaNs first, order kept
    p1 = _argsort(xp, xp.where(nan, 0, -xs))
    p2 = _argsort(xp, (~xp.take_along_axis(nan, p1, axis=-1)).astype(xp.int8))
    order = xp.take_along_axis(p1, p2, axis=-1)
    return xs, xp.sort(order[..., :k], axis=-1)


def _kmax_aux(v):
    """The node's scratch as one int32 per output (the CPU's layout), shape dims + (batch,)."""
    n = v.size * v.bd
    return v.aux().view(v.xp.int32)[:n].reshape(v.shape, order="F")


def _kmax(v):
    xp, d = v.xp, v.ia[0]
    xs, sel = _kmax_sel(v)
    xp.moveaxis(v.y, d, -1)[...] = xp.take_along_axis(xs, sel, axis=-1)
    xp.moveaxis(_kmax_aux(v), d, -1)[...] = sel


def _kmax_bwd(v, i):
    xp, d = v.xp, v.ia[0]
    sel = xp.moveaxis(_kmax_aux(v), d, -1).astype(xp.int64)
    gys = xp.moveaxis(v.gy, d, -1)
    L = v.arg_dims(0)[d]
    t = xp.zeros(gys.shape[:-1] + (L,), dtype=v.dtype)
    xp.put_along_axis(t, sel, gys, axis=-1)       # the k indices of a slice are distinct
    v.acc(0, xp.moveaxis(t, -1, d))


register("kmax_pooling", _kmax, _kmax_bwd)
