"""GPU kernels of the losses (hinge, hinge_batch, hinge_dim, binary_log_loss, huber_distance,
l1_distance, poisson_loss, pairwise_rank_loss; the CPU's: dyn/_core/cpu/loss.pyx). Each batch
element is a separate loss; an argument of batch 1 is shared by every batch element (its gradient,
through v.acc, is summed over the batch). NaN terms propagate as on the CPU."""
import numpy as np

from dyn._core.gpu.device import register
from dyn._core.gpu.kernels._util import quiet as _quiet

BLL, HUBER, L1 = range(3)
FLT_MIN = float(np.finfo(np.float32).tiny)

# ---------------------------------------------------------------- hinge, hinge_batch, hinge_dim


def _hinge_terms(xp, x, onehot, margin):
    """x: (inner, outer...) slices along axis 0, onehot the picked entry of each slice: the terms
    x_i + margin - x_v off the pick (the CPU's float test: t <= 0 inactive, NaN active)."""
    xv = xp.sum(xp.where(onehot, x, 0), axis=0, keepdims=True)
    t = x + (margin - xv)
    return t, ~onehot


def _hinge_loss(xp, t, off):
    return xp.sum(xp.where(off & ~(t <= 0), t, 0), axis=0)     # a NaN term makes the loss NaN


def _hinge_grad(xp, t, off, onehot, c):
    # the same float test as forward, so the active set is the one forward used; a NaN term:
    # its derivative is NaN, for x_i and for x_v
    pos = off & (t > 0)
    nan = off & ~(t <= 0) & ~(t > 0)
    cnt = xp.sum(pos, axis=0, keepdims=True).astype(t.dtype)
    tn = xp.sum(xp.where(nan, t, 0), axis=0, keepdims=True)
    d = xp.where(pos, c, xp.where(nan, t, 0))
    return xp.where(onehot, -(c * cnt - tn), d)


def _hinge_x(v):
    xp = v.xp
    m = v.arg_dims(0)[0]
    x = v.x(0)
    x = xp.broadcast_to(x.reshape((m, x.shape[-1]), order="F"), (m, v.bd))
    sel = xp.asarray(v.idx().astype(np.int64))
    onehot = xp.arange(m)[:, None] == sel[None, :]
    return x, onehot


def _hinge_fwd(parts):
    """The forward of hinge (parts: _hinge_x) or hinge_dim (parts: _hdim_x)."""
    def fwd(v):
        x, onehot = parts(v)
        t, off = _hinge_terms(v.xp, x, onehot, v.fa[0])
        v.y[...] = _hinge_loss(v.xp, t, off).reshape(v.shape, order="F")
    return fwd


def _hinge_bwd(v, i):
    xp = v.xp
    x, onehot = _hinge_x(v)
    t, off = _hinge_terms(xp, x, onehot, v.fa[0])
    v.acc(0, _hinge_grad(xp, t, off, onehot, v.gy.reshape((1, v.bd), order="F")))


register("hinge", _hinge_fwd(_hinge_x), _hinge_bwd)


def _hdim_x(v):
    """x as (inner, outer, batch): the slices along axis 0 (d=1: x transposed), and the pick of
    each slice (one index per slice, the same for every batch element)."""
    xp = v.xp
    dims = v.arg_dims(0)
    r = dims[0]
    c = 1
    for k in dims[1:]:
        c *= k
    x = v.x(0).reshape((r, c, v.arg_bd(0)), order="F")
    if v.ia[0]:
        x = x.transpose(1, 0, 2)
    sel = xp.asarray(v.idx().astype(np.int64))
    onehot = (xp.arange(x.shape[0])[:, None] == sel[None, :])[:, :, None]
    return x, onehot


def _hdim_bwd(v, i):
    xp = v.xp
    x, onehot = _hdim_x(v)
    t, off = _hinge_terms(xp, x, onehot, v.fa[0])
    c = v.gy.reshape((1,) + v.shape, order="F")
    d = _hinge_grad(xp, t, off, onehot, c)
    if v.ia[0]:
        d = d.transpose(1, 0, 2)
    v.acc(0, d)


register("hinge_dim", _hinge_fwd(_hdim_x), _hdim_bwd)

# ---------------------------------------------------------------- pair losses: binary_log_loss, huber, l1


def _flat(v, i):
    """Argument i as (items, its batch)."""
    x = v.x(i)
    return x.reshape((-1, x.shape[-1]), order="F")


def _clamp(xp, p):
    # DyNet's convention: a probability never goes below FLT_MIN (a NaN stays NaN)
    return xp.where(p <= FLT_MIN, FLT_MIN, p)


def _pairloss(v):
    xp = v.xp
    a, b = _flat(v, 0), _flat(v, 1)
    kind, c = v.ia[0], v.fa[0]
    with _quiet(xp):
        if kind == BLL:
            # a term whose weight is 0 is 0, even where its log is clamped
            t = xp.where(b != 0, b * xp.log(_clamp(xp, a)), 0) \
                + xp.where(b != 1, (1 - b) * xp.log(_clamp(xp, 1 - a)), 0)
            acc = -xp.sum(t, axis=0)
        elif kind == HUBER:
            d = a - b
            ad = xp.abs(d)
            acc = xp.sum(xp.where(ad < c, d * d, c * (2 * ad - c)), axis=0)
        else:
            acc = xp.sum(xp.abs(a - b), axis=0)
    v.y[...] = acc.reshape(v.shape, order="F")


def _pairloss_bwd(v, i):
    xp = v.xp
    a, b = _flat(v, 0), _flat(v, 1)
    kind, hc = v.ia[0], v.fa[0]
    c = v.gy.reshape((1, v.bd), order="F")
    with _quiet(xp):
        if kind == BLL:
            if i == 0:
                d = c * ((1 - b) / _clamp(xp, 1 - a) - b / _clamp(xp, a))
            else:
                d = c * (xp.log(_clamp(xp, 1 - a)) - xp.log(_clamp(xp, a)))
        else:
            sg = c if i == 0 else -c
            diff = a - b
            s = xp.sign(diff)
            if kind == HUBER:
                d = xp.where(xp.abs(diff) < hc, 2 * sg * diff, 2 * sg * hc * s)
            else:
                d = sg * s
            d = xp.where(diff != diff, diff, d)     # NaN in: a NaN gradient, not sign(NaN) = 0
    v.acc(i, d)


register("pair_loss", _pairloss, _pairloss_bwd)

# ---------------------------------------------------------------- poisson_loss


def _poisson(v):
    xp = v.xp
    with _quiet(xp):
        x = v.x(0)
        v.y[...] = xp.exp(x) - v.fa[0] * x + v.fa[1]


def _poisson_bwd(v, i):
    xp = v.xp
    with _quiet(xp):
        v.acc(0, v.gy * (xp.exp(v.x(0)) - v.fa[0]))


register("poisson_loss", _poisson, _poisson_bwd)

# ---------------------------------------------------------------- pairwise_rank_loss


def _prl(v):
    xp = v.xp
    t = v.fa[0] - v.x(0) + v.x(1)
    v.y[...] = xp.where(t <= 0, 0, t)      # NaN stays NaN


def _prl_bwd(v, i):
    # y > 0 exactly where the margin is violated: the gradient at the kink is 0
    xp = v.xp
    y, gy = v.y, v.gy
    d = xp.where(y > 0, -gy if i == 0 else gy, 0)
    v.acc(i, xp.where(y != y, y, d))       # NaN in: a NaN gradient


register("pairwise_rank_loss", _prl, _prl_bwd)
