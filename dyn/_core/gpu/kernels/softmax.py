"""GPU kernels of the softmax family (softmax, log_softmax and its restricted form, logsumexp over a
list, pickneglogsoftmax(_batch); the CPU's: dyn/_core/cpu/softmax.pyx). Each normalises the rows of
every column (d=0) or the columns of every row (d=1) of each batch element, as the CPU does."""
from dyn._core.gpu.device import register
from dyn._core.gpu.kernels._util import quiet as _quiet


def _slices(v, a):
    """a (the node's shape) as (rows, cols, batch) and the axis normalised: 0 per column
    (ia[0] = 0), 1 per row."""
    r = v.dims[0]
    return a.reshape((r, v.size // r, a.shape[-1]), order="F"), (1 if v.ia[0] else 0)

# ---------------------------------------------------------------- softmax, log_softmax


def _sm(v):
    xp = v.xp
    x, ax = _slices(v, v.x(0))
    with _quiet(xp):
        # a NaN anywhere in a slice makes the max, so the whole slice, NaN (as the CPU's sum)
        s = x - xp.max(x, axis=ax, keepdims=True)
        e = xp.exp(s)
        acc = xp.sum(e, axis=ax, keepdims=True)
        if v.ia[1]:
            # (x - max) - log(acc): rounding max + log(acc) first loses digits
            r = s - xp.log(acc)
        else:
            r = e * (1 / acc)
    v.y[...] = r.reshape(v.shape, order="F")


def _sm_bwd(v, i):
    xp = v.xp
    y, ax = _slices(v, v.y)
    gy, _ = _slices(v, v.gy)
    with _quiet(xp):
        if v.ia[1]:      # d log_softmax: gx = gy - softmax * sum(gy)
            d = gy - xp.exp(y) * xp.sum(gy, axis=ax, keepdims=True)
        else:            # d softmax: gx = y * (gy - <gy, y>)
            d = y * (gy - xp.sum(gy * y, axis=ax, keepdims=True))
    v.acc(0, d)


register("softmax", _sm, _sm_bwd)
register("log_softmax", _sm, _sm_bwd)

# ---------------------------------------------------------------- log_softmax restricted to some entries


def _rlsm(v):
    xp = v.xp
    m = v.dims[0]
    sel = xp.asarray(v.idx())
    x = v.x(0).reshape(m, order="F")[sel]
    with _quiet(xp):
        s = x - xp.max(x)
        r = s - xp.log(xp.sum(xp.exp(s)))
    out = xp.full((m,), -xp.inf, dtype=v.dtype)
    out[sel] = r
    v.y[...] = out.reshape(v.shape, order="F")


def _rlsm_bwd(v, i):
    # entries outside the restriction are constants (-inf): no gradient
    xp = v.xp
    m = v.dims[0]
    sel = xp.asarray(v.idx())        # distinct (the op's constructor makes a set)
    gy = v.gy.reshape(m, order="F")[sel]
    y = v.y.reshape(m, order="F")[sel]
    d = xp.zeros((m,), dtype=v.dtype)
    with _quiet(xp):
        d[sel] = gy - xp.exp(y) * xp.sum(gy)
    v.acc(0, d)


register("restricted_log_softmax", _rlsm, _rlsm_bwd)

# ---------------------------------------------------------------- logsumexp over a list


def _lse(v):
    xp = v.xp
    xs = [v.x(j) for j in range(v.nargs)]
    # the CPU's running max: a NaN in the first argument stays, a later NaN is not taken (its
    # exp makes the sum NaN, unless the max is -inf)
    mx = xp.broadcast_to(xs[0], v.shape)
    for x in xs[1:]:              # a loop over the arguments
        mx = xp.where(x > mx, x, mx)
    fin = mx != -xp.inf
    acc = 0
    with _quiet(xp):
        for x in xs:
            # all -inf (log of zero probabilities) stays -inf, not NaN
            acc = acc + xp.where(fin, xp.exp(x - mx), 0)
        v.y[...] = mx + xp.log(acc)


def _lse_bwd(v, i):
    xp = v.xp
    y = v.y
    with _quiet(xp):
        d = xp.where(y != -xp.inf, v.gy * xp.exp(v.x(i) - y), 0)
    v.acc(i, d)


register("logsumexp", _lse, _lse_bwd)

# ---------------------------------------------------------------- pickneglogsoftmax(_batch)


def _pnls_x(v):
    """x as (m, B) (a batch-1 x broadcast: the same normaliser for every index), the picks as
    device indices, and aux as (2, B): the max and the log of the shifted sum per element."""
    xp = v.xp
    B = v.bd
    m = v.arg_dims(0)[0]
    x = v.x(0)
    x = xp.broadcast_to(x.reshape((m, x.shape[-1]), order="F"), (m, B))
    sel = xp.asarray(v.idx().astype("int64"))
    return x, sel, v.aux((2, B))


def _pnls(v):
    xp = v.xp
    x, sel, aux = _pnls_x(v)
    cols = xp.arange(v.bd)
    with _quiet(xp):
        mx = xp.max(x, axis=0)
        ls = xp.log(xp.sum(xp.exp(x - mx), axis=0))
        # kept for backward, as the CPU: (max, log of the shifted sum) per element
        aux[0] = mx
        aux[1] = ls
        v.y[...] = ((mx - x[sel, cols]) + ls).reshape(v.shape, order="F")


def _pnls_bwd(v, i):
    # d/dx (-log softmax(x)[v]) = softmax(x) - onehot(v)
    xp = v.xp
    x, sel, aux = _pnls_x(v)
    m = x.shape[0]
    c = v.gy.reshape(v.bd, order="F")
    onehot = xp.arange(m)[:, None] == sel[None, :]
    with _quiet(xp):
        d = c * xp.exp((x - aux[0]) - aux[1]) - xp.where(onehot, c, 0)
    v.acc(0, d)


register("pickneglogsoftmax", _pnls, _pnls_bwd)
