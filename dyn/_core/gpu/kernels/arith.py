"""GPU kernels of arithmetic (the CPU's: dyn/_core/cpu/arith.pyx): elementwise binary ops with
broadcasting, x*a + c, the matrix product and affine_transform (matmul: cuBLAS on cupy), esum, the
reductions to one value per batch element, dot_product / squared_distance and sum_batches.

Matrix products work in the transposed, batch-first view of the column-major arrays: an array of
shape (m, n, bd) in column-major order is, as it lies in memory, a row-major (bd, n, m) array
(its .T), so y = W x per batch element is yT = xT @ WT, a batched product of C-contiguous arrays
(broadcast over a batch-1 operand); a W shared over the batch makes one product over all columns.
"""
from dyn._core.gpu.device import register
from dyn._core.gpu.kernels._util import quiet as _quiet
from dyn._core.gpu.kernels._util import quiet_kernel

ADD, SUB, MUL, DIV = range(4)



# ---------------------------------------------------------------- elementwise binary


def _padded(v, i, nd):
    """Argument i as dims padded with 1s to nd, then its batch."""
    d = v.arg_dims(i)
    return v.x(i).reshape(d + (1,) * (nd - len(d)) + (v.arg_bd(i),), order="F")


def _cw(v):
    nd = len(v.dims)
    a, b = _padded(v, 0, nd), _padded(v, 1, nd)
    k, y = v.ia[0], v.y
    if k == ADD:
        v.xp.add(a, b, out=y)
    elif k == SUB:
        v.xp.subtract(a, b, out=y)
    elif k == MUL:
        v.xp.multiply(a, b, out=y)
    else:
        with _quiet(v.xp):
            v.xp.divide(a, b, out=y)


def _unbroadcast(v, i, d):
    """d (the node's shape) summed over the dims where argument i is 1 and the node is not (the
    batch is left to acc)."""
    ad = v.arg_dims(i)
    axes = tuple(j for j, e in enumerate(v.dims) if e != 1 and (ad[j] if j < len(ad) else 1) == 1)
    return d.sum(axis=axes, keepdims=True) if axes else d


def _cw_bwd(v, i):
    k, gy = v.ia[0], v.gy
    if k == ADD or (k == SUB and i == 0):
        d = gy
    elif k == SUB:
        d = -gy
    else:
        nd = len(v.dims)
        a, b = _padded(v, 0, nd), _padded(v, 1, nd)
        with _quiet(v.xp):
            if k == MUL:
                d = gy * (b if i == 0 else a)
            elif i == 0:
                d = gy / b
            else:
                d = -(gy * a / (b * b))
    if d.shape != v.shape:
        d = v.xp.broadcast_to(d, v.shape)
    v.acc(i, _unbroadcast(v, i, d))


register("cwise", _cw, _cw_bwd)

# ---------------------------------------------------------------- x * a + c


def _affs(v):
    x = v.x(0)
    a, c = v.fa
    with _quiet(v.xp):
        v.y[...] = x * x.dtype.type(a) + x.dtype.type(c)


def _affs_bwd(v, i):
    with _quiet(v.xp):
        v.acc(0, v.gy * v.dtype(v.fa[0]))


register("scalar_affine", _affs, _affs_bwd)

# ---------------------------------------------------------------- matrix product


def _mat(dims):
    """(rows, columns) of a matrix operand: the columns are every dim after the first (an
    affine_transform's bias alone may have more than 2 dims)."""
    c = 1
    for e in dims[1:]:
        c *= e
    return (dims[0] if dims else 1), c


def _T(v, i):
    """Argument i (a matrix operand) as its row-major, batch-first transpose (bd, cols, rows)."""
    r, c = _mat(v.arg_dims(i))
    return v.x(i).reshape((r, c, v.arg_bd(i)), order="F").T


def _mmT(v, iW, ix):
    """W x (arguments iW, ix) in the transposed layout: (bd, n, m) with bd the larger batch."""
    WT, xT = _T(v, iW), _T(v, ix)
    m, k = WT.shape[2], WT.shape[1]
    if WT.shape[0] == 1:        # W shared: one product over every column of the batch
        return v.xp.matmul(xT.reshape(-1, k), WT[0]).reshape(xT.shape[0], xT.shape[1], m)
    return v.xp.matmul(xT, WT)


def _yT(v):
    """The node's value as (bd, n, m): a view over its memory."""
    m, n = _mat(v.dims)
    return v.wrap(v.vptr, (m, n, v.bd)).T


def _mm_bwd_T(v, gyT, iW, ix, which):
    """Add the gradient of W (which 0) or x (which 1), from gyT (bd, n, m)."""
    xp = v.xp
    WT, xT = _T(v, iW), _T(v, ix)
    m, k = WT.shape[2], WT.shape[1]
    if which == 0:
        if WT.shape[0] == 1:    # shared W: the sum over the batch in the same product
            if xT.shape[0] != gyT.shape[0]:     # x batch 1 under a batched bias (affine)
                gyT = gyT.sum(axis=0, keepdims=True)
            dT = xp.matmul(xT.reshape(-1, k).T, gyT.reshape(-1, m))[None]
        else:
            dT = xp.matmul(xp.swapaxes(xT, -1, -2), gyT)              # (bd, k, m)
        v.acc(iW, dT.T)
    else:
        if WT.shape[0] == 1:
            dT = xp.matmul(gyT.reshape(-1, m), WT[0].T).reshape(gyT.shape[0], gyT.shape[1], k)
        else:
            dT = xp.matmul(gyT, xp.swapaxes(WT, -1, -2))              # (bd, n, k)
        v.acc(ix, dT.T)


def _mm(v):
    WT, xT = _T(v, 0), _T(v, 1)
    yT = _yT(v)
    m, k = WT.shape[2], WT.shape[1]
    if WT.shape[0] == 1:
        v.xp.matmul(xT.reshape(-1, k), WT[0], out=yT.reshape(-1, m))
    else:
        v.xp.matmul(xT, WT, out=yT)


def _mm_bwd(v, i):
    m, n = _mat(v.dims)
    _mm_bwd_T(v, v.gy.reshape((m, n, v.bd), order="F").T, 0, 1, i)


register("matmul", quiet_kernel(_mm), quiet_kernel(_mm_bwd))

# ---------------------------------------------------------------- affine_transform


def _affine(v):
    m, n = _mat(v.dims)
    br, bc = _mat(v.arg_dims(0))
    y3 = v.wrap(v.vptr, (m, n, v.bd))
    y3[...] = v.x(0).reshape((br, bc, v.arg_bd(0)), order="F")     # bias over columns and batch
    yT = y3.T
    for i in range(1, v.nargs, 2):     # one product per term (few terms)
        yT += _mmT(v, i, i + 1)


def _affine_bwd(v, i):
    m, n = _mat(v.dims)
    gy3 = v.gy.reshape((m, n, v.bd), order="F")
    if i == 0:
        if _mat(v.arg_dims(0))[1] == 1 and n != 1:
            gy3 = gy3.sum(axis=1, keepdims=True)
        v.acc(0, gy3)
        return
    j = i if i % 2 == 1 else i - 1
    gyT = gy3.T
    if _mat(v.arg_dims(j + 1))[1] != n:        # a one-column term broadcast over the columns
        gyT = gyT.sum(axis=1, keepdims=True)
    _mm_bwd_T(v, gyT, j, j + 1, 0 if i % 2 == 1 else 1)


register("affine_transform", quiet_kernel(_affine), quiet_kernel(_affine_bwd))

# ---------------------------------------------------------------- esum


def _esum(v):
    y = v.y
    y[...] = v.x(0)
    for i in range(1, v.nargs):        # one add per argument
        y += v.x(i)


def _sumlike_bwd(v, i):
    v.acc(i, v.gy)


register("esum", _esum, _sumlike_bwd)

# ---------------------------------------------------------------- reductions to one value per batch element


def _flat(v, i):
    return v.x(i).reshape((v.arg_size(i), v.arg_bd(i)), order="F")


def _red(v):
    x, k, xp = _flat(v, 0), v.ia[0], v.xp
    y = v.y.reshape((1, v.bd), order="F")
    with _quiet(xp):
        if k == 0:
            xp.sum(x, axis=0, keepdims=True, out=y)
        elif k == 1:
            xp.sum(x * x, axis=0, keepdims=True, out=y)
        else:
            y[...] = xp.sqrt(xp.sum(x * x, axis=0, keepdims=True))


def _red_bwd(v, i):
    x, k, xp = _flat(v, 0), v.ia[0], v.xp
    gy = v.gy.reshape((1, v.bd), order="F")
    with _quiet(xp):
        if k == 0:
            d = xp.broadcast_to(gy, x.shape)
        elif k == 1:
            d = (2 * gy) * x
        else:
            y = v.y.reshape((1, v.bd), order="F")
            d = xp.where(y != 0, gy / y, 0) * x       # a NaN norm: NaN gradients
    v.acc(0, d)


register("reduce_elems", _red, _red_bwd)

# ---------------------------------------------------------------- dot_product, squared_distance


def _pair(v):
    a, b, xp = _flat(v, 0), _flat(v, 1), v.xp
    y = v.y.reshape((1, v.bd), order="F")
    with _quiet(xp):
        if v.ia[0] == 0:
            xp.sum(a * b, axis=0, keepdims=True, out=y)
        else:
            t = a - b
            xp.sum(t * t, axis=0, keepdims=True, out=y)


def _pair_bwd(v, i):
    a, b, xp = _flat(v, 0), _flat(v, 1), v.xp
    gy = v.gy.reshape((1, v.bd), order="F")
    with _quiet(xp):
        if v.ia[0] == 0:
            d = gy * (b if i == 0 else a)
        else:
            d = ((2 * gy) if i == 0 else (-2 * gy)) * (a - b)
    if d.shape[-1] != v.bd:
        d = xp.broadcast_to(d, (d.shape[0], v.bd))
    v.acc(i, d)


register("pair_reduce", _pair, _pair_bwd)

# ---------------------------------------------------------------- sum_batches


def _sumb(v):
    v.xp.sum(v.x(0), axis=-1, keepdims=True, out=v.y)


def _sumb_bwd(v, i):
    v.acc(0, v.xp.broadcast_to(v.gy, v.arg_shape(0)))


register("sum_batches", _sumb, _sumb_bwd)
