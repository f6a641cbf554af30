"""GPU kernels of the random family (the samplers random_normal, random_bernoulli, random_uniform,
random_gumbel, and the shared-mask dropouts dropout_dim, dropout_batch, block_dropout; the CPU's:
dyn/_core/cpu/random.pyx). They draw on the device (v.bk.uniform/normal): the distributions are
the CPU's, not its stream of values."""
import numpy as np

from dyn._core.gpu.device import register
from dyn._core.gpu.kernels._util import quiet as _quiet

NORMAL, BERNOULLI, UNIFORM, GUMBEL = range(4)

# ---------------------------------------------------------------- leaves


def _sample(v):
    xp = v.xp
    kind = v.ia[0]
    a, b = v.fa
    y = v.y
    if kind == NORMAL:          # a = mean, b = stddev
        y[...] = a + b * v.bk.normal(v.shape, np.float64)
        return
    # u in (0, 1), drawn in float64 (a float32 u may round to 1, where gumbel's log(-log u) is -inf)
    u = v.bk.uniform(v.shape, np.float64)
    if kind == BERNOULLI:       # a = p, b = scale: p = 0 never, p = 1 always
        y[...] = xp.where(u < a, b, 0)
    elif kind == UNIFORM:       # a = left, b = right
        y[...] = a + (b - a) * u
    else:                       # a = mu, b = beta
        with _quiet(xp):
            y[...] = a - b * xp.log(-xp.log(u))


# one kernel, four names (so a node says which sampler it is); no backward: constants
register("random_normal", _sample)
register("random_bernoulli", _sample)
register("random_uniform", _sample)
register("random_gumbel", _sample)

# ---------------------------------------------------------------- shared-mask dropout


def _drop(v):
    # per batch element x is a x m x c; one Bernoulli(1 - p) value per (a, c) shared along m,
    # expanded into the per-element mask in aux (backward multiplies it in)
    a, m, c = v.ia[0], v.ia[1], v.ia[2]
    p = v.fa[0]
    bd = v.bd
    mask = v.aux((a, m, c, bd))
    if p == 0:                  # draws nothing (as dropout)
        mask.fill(1)
    else:
        scale = (1.0 / (1.0 - p)) if p < 1 else 0.0
        keep = v.bk.uniform((a, 1, c, bd), np.float64) < 1.0 - p
        mask[...] = keep * scale
    v.y[...] = v.x(0) * v.aux(v.shape)


def _drop_bwd(v, i):
    v.acc(0, v.gy * v.aux(v.shape))


register("dropout_dim", _drop, _drop_bwd)
register("dropout_batch", _drop, _drop_bwd)
register("block_dropout", _drop, _drop_bwd)
