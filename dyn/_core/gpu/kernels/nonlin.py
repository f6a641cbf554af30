"""GPU kernels of the elementwise nonlinearities and the gradient-flow ops (dropout, noise,
nobackprop; the CPU's: dyn/_core/cpu/nonlin.pyx). Dropout draws its mask on the device."""
from dyn._core.gpu.device import register
from dyn._core.gpu.kernels._util import copy_fwd, identity_bwd
from dyn._core.gpu.kernels._util import quiet as _quiet

TANH, LOGISTIC, RECTIFY, EXP, LOG = range(5)


def _unary(v):
    xp, x, y = v.xp, v.x(0), v.y
    k = v.ia[0]
    if k == TANH:
        xp.tanh(x, out=y)
    elif k == LOGISTIC:
        # exp(-x) overflows to inf for x << 0: the right limit 0
        with _quiet(xp):
            y[...] = 1 / (1 + xp.exp(-x))
    elif k == RECTIFY:
        y[...] = xp.where(x <= 0, 0, x)       # NaN passes through
    elif k == EXP:
        with _quiet(xp):
            xp.exp(x, out=y)
    else:
        with _quiet(xp):
            xp.log(x, out=y)


def _unary_bwd(v, i):
    gy, y, k = v.gy, v.y, v.ia[0]
    if k == TANH:
        d = gy * (1 - y * y)
    elif k == LOGISTIC:
        d = gy * y * (1 - y)
    elif k == RECTIFY:
        d = v.xp.where(y > 0, gy, y)          # 0 where x <= 0, NaN for a NaN input
    elif k == EXP:
        d = gy * y
    else:
        with _quiet(v.xp):
            d = gy / v.x(0)
    v.acc(0, d)



register("nonlin_unary", _unary, _unary_bwd)


def _dropout(v):
    p = v.fa[0]
    mask = v.aux(v.shape)
    if p == 0:
        mask.fill(1)
    else:
        keep = v.bk.uniform(v.shape, v.dtype) < (1 - p)
        mask[...] = keep * ((1 / (1 - p)) if p < 1 else 0)
    v.y[...] = v.x(0) * mask


def _dropout_bwd(v, i):
    v.acc(0, v.gy * v.aux(v.shape))


register("dropout", _dropout, _dropout_bwd)


def _noise(v):
    v.y[...] = v.x(0) + v.fa[0] * v.bk.normal(v.shape, v.dtype)


register("noise", _noise, identity_bwd)


def _none_bwd(v, i):
    pass


register("nobackprop", copy_fwd, _none_bwd)
