"""GPU kernels of the shape family (declared in dyn/_core/ops/shape.pyx; the CPU's:
dyn/_core/cpu/shape.pyx): selection along one dim, batch elements, concatenation (along a dim or
the batch), transpose, reshape (a copy, as on the CPU), x ** c and pow(x, e).

Everything here moves data: forward gathers with slices or fancy indexing, backward builds the
argument's gradient and adds it with v.acc (repeated indices add up through scatter_add_rows;
batch-1 arguments get the sum over the batch)."""
import math

from dyn._core.gpu.device import register
from dyn._core.gpu.kernels._util import ext as _ext
from dyn._core.gpu.kernels._util import quiet as _quiet


def _split(dims, k):
    """(inner, L, outer): dims before k, dim k, dims after k."""
    e = _ext(dims)
    return math.prod(e[:k]), e[k], math.prod(e[k + 1:])


def _index(xp, ix):
    """A slice where the host indices are a contiguous ascending run (pick_range, slices),
    otherwise a device index array."""
    n = len(ix)
    if n and int(ix[-1]) - int(ix[0]) == n - 1 and (n == 1 or bool((ix[1:] - ix[:-1] == 1).all())):
        return slice(int(ix[0]), int(ix[0]) + n)
    return xp.asarray(ix.astype("int64"))


def _unique(ix):
    return len(set(ix.tolist())) == len(ix)      # host data

# ---------------------------------------------------------------- gather along one dim
# ia[0] = dim k, ia[1] = remove dim k, ia[2] = one index per output batch element


def _sel(v):
    xp = v.xp
    k, perbatch = v.ia[0], v.ia[2]
    ix = v.idx()
    inner, L, outer = _split(v.arg_dims(0), k)
    x4 = v.x(0).reshape((inner, L, outer, v.arg_bd(0)), order="F")
    if perbatch:
        # batch element b takes slice ix[b] of its own element (or of the only one)
        m = len(ix)
        xb = xp.broadcast_to(x4, (inner, L, outer, m))
        j = xp.broadcast_to(xp.asarray(ix.astype("int64")).reshape(1, 1, 1, m), (inner, 1, outer, m))
        v.y.reshape((inner, 1, outer, m), order="F")[...] = xp.take_along_axis(xb, j, axis=1)
    else:
        y4 = v.y.reshape((inner, len(ix), outer, v.bd), order="F")
        y4[...] = x4[:, _index(xp, ix)]


def _sel_bwd(v, i):
    xp = v.xp
    k, perbatch = v.ia[0], v.ia[2]
    ix = v.idx()
    inner, L, outer = _split(v.arg_dims(0), k)
    if perbatch:
        m = len(ix)
        gy4 = v.gy.reshape((inner, 1, outer, v.bd), order="F")
        hit = xp.arange(L).reshape(1, L, 1, 1) == xp.asarray(ix.astype("int64")).reshape(1, 1, 1, m)
        v.acc(0, xp.where(hit, gy4, 0))     # a batch-1 argument gets the sum over the batch
        return
    gy4 = v.gy.reshape((inner, len(ix), outer, v.bd), order="F")
    if _unique(ix):
        d = xp.zeros((inner, L, outer, v.bd), dtype=v.dtype)
        d[:, _index(xp, ix)] = gy4
        v.acc(0, d)
    else:
        # repeated indices add up: rows (dim k) first for scatter_add_rows
        t = xp.zeros((L, inner, outer, v.bd), dtype=v.dtype)
        v.bk.scatter_add_rows(t, ix.astype("int64"), xp.ascontiguousarray(xp.moveaxis(gy4, 1, 0)))
        v.acc(0, xp.moveaxis(t, 0, 1))


register("select", _sel, _sel_bwd)

# ---------------------------------------------------------------- batch elements


def _bsel(v):
    ix = v.idx()
    x = v.x(0).reshape((v.size, v.arg_bd(0)), order="F")
    v.y.reshape((v.size, v.bd), order="F")[...] = x[:, _index(v.xp, ix)]


def _bsel_bwd(v, i):
    xp = v.xp
    ix = v.idx()
    gy = v.gy.reshape((v.size, v.bd), order="F")
    t = xp.zeros((v.arg_bd(0), v.size), dtype=v.dtype)      # batch elements first
    if _unique(ix):
        t[_index(xp, ix)] = gy.T
    else:
        v.bk.scatter_add_rows(t, ix.astype("int64"), xp.ascontiguousarray(gy.T))
    v.acc(0, t.T)


register("pick_batch_elems", _bsel, _bsel_bwd)

# ---------------------------------------------------------------- concatenate along dim k
# Arguments may come per member (autobatching: AB_PTR_ALL): v.x stacks them, v.acc scatters.


def _cat_blocks(v):
    k = v.ia[0]
    e = _ext(v.dims)
    inner, Ln, outer = math.prod(e[:k]), e[k], math.prod(e[k + 1:])
    off = 0
    for i in range(v.nargs):          # a loop over the arguments
        La = _ext(v.arg_dims(i))[k]
        yield i, (inner, Ln, outer), off, La
        off += La


def _cat(v):
    for i, (inner, Ln, outer), off, La in _cat_blocks(v):
        y4 = v.y.reshape((inner, Ln, outer, v.bd), order="F")
        y4[:, off:off + La] = v.x(i).reshape((inner, La, outer, v.arg_bd(i)), order="F")


def _cat_bwd(v, i):
    for j, (inner, Ln, outer), off, La in _cat_blocks(v):
        if j == i:
            gy4 = v.gy.reshape((inner, Ln, outer, v.bd), order="F")
            v.acc(i, gy4[:, off:off + La])
            return


register("concatenate", _cat, _cat_bwd)

# ---------------------------------------------------------------- concatenate along the batch


def _catb(v):
    y = v.y.reshape((v.size, v.bd), order="F")
    off = 0
    for i in range(v.nargs):          # a loop over the arguments
        b = v.arg_bd(i)
        y[:, off:off + b] = v.x(i).reshape((v.size, b), order="F")
        off += b


def _catb_bwd(v, i):
    off = sum(v.arg_bd(j) for j in range(i))
    gy = v.gy.reshape((v.size, v.bd), order="F")
    v.acc(i, gy[:, off:off + v.arg_bd(i)])


register("concatenate_to_batch", _catb, _catb_bwd)

# ---------------------------------------------------------------- transpose (any permutation)


def _tr_axes(v):
    p = [int(j) for j in v.idx()]
    m = len(p)
    xd = _ext(v.arg_dims(0))[:m] + (v.arg_bd(0),)
    return p, m, xd


def _tr(v):
    p, m, xd = _tr_axes(v)
    x = v.x(0).reshape(xd, order="F")
    v.y.reshape(tuple(_ext(v.dims)[:m]) + (v.bd,), order="F")[...] = v.xp.transpose(x, p + [m])


def _tr_bwd(v, i):
    p, m, xd = _tr_axes(v)
    inv = [0] * m
    for j, q in enumerate(p):
        inv[q] = j
    gy = v.gy.reshape(tuple(_ext(v.dims)[:m]) + (v.bd,), order="F")
    v.acc(0, v.xp.transpose(gy, inv + [m]))


register("transpose", _tr, _tr_bwd)

# ---------------------------------------------------------------- reshape (a copy, as the CPU's)


def _rs(v):
    v.y[...] = v.x(0).reshape(v.shape, order="F")


def _rs_bwd(v, i):
    # the argument's own shape: a batch-1 argument reshaped into a batch takes the elements back
    # one for one (not a sum over the node's batch)
    v.acc(0, v.gy.reshape(v.arg_shape(0), order="F"))


register("reshape", _rs, _rs_bwd)

# ---------------------------------------------------------------- x ** c (number) and pow(x, e)


def _powc(v):
    with _quiet(v.xp):
        v.xp.power(v.x(0), v.dtype(v.fa[0]), out=v.y)


def _powc_bwd(v, i):
    c = v.fa[0]
    if c != 0:
        with _quiet(v.xp):
            v.acc(0, v.gy * c * v.xp.power(v.x(0), v.dtype(c - 1)))


register("pow_const", _powc, _powc_bwd)


def _expo(v):
    """The exponent as an array broadcasting over the node: 1s then its batch."""
    return v.x(1).reshape((1,) * len(v.dims) + (v.arg_bd(1),), order="F")


def _pow(v):
    with _quiet(v.xp):
        v.y[...] = v.xp.power(v.x(0), _expo(v))


def _pow_bwd(v, i):
    xp = v.xp
    e, x, gy = _expo(v), v.x(0), v.gy
    with _quiet(xp):
        if i == 0:
            # no slope where the exponent is 0 (the CPU skips it: no 0 * inf)
            v.acc(0, xp.where(e != 0, gy * e * xp.power(x, e - 1), 0))
        else:
            y = v.y
            t = xp.where(y != 0, gy.astype(xp.float64) * y * xp.log(x.astype(xp.float64)), 0)
            axes = tuple(range(len(v.dims)))
            v.acc(1, t.sum(axis=axes, keepdims=True))


register("pow", _pow, _pow_bwd)
