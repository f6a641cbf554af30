"""Losses, sparse probability maps, normalisation and gradient-flow ops
(compiled in dyn/_core/ops/loss.pyx).

DyNet runs several of these (sparsemax, constrained_softmax, binary_log_loss,
huber_distance, l1_distance, poisson_loss, weight_norm) on unbatched input
only; here each batch element is handled separately, and an argument of batch
1 is shared by the whole batch. Each docstring says what it does with a batch.
"""

from __future__ import annotations

import math

import numpy as np

from dyn._core.ops import loss as _k
from dyn.ops import _check
from dyn.ops._registry import Case, op

_ELEM_BATCHES = ("none", "all")
_FLT_MIN = float(np.finfo(np.float32).tiny)


# ---------------------------------------------------------------- numpy references


def _hinge_vec(x, v, m):
    x = x.reshape(-1)
    t = np.maximum(0.0, x - x[v] + m)
    t[v] = 0.0
    return t.sum()


def _hinge_batch_ref(x, vs, m=1.0):
    xs = x.reshape(x.shape[0], -1)  # (n, B); B is 1 when x is shared
    cols = xs[:, [0] * len(vs)] if xs.shape[1] == 1 else xs
    return np.array([[_hinge_vec(cols[:, b], v, m) for b, v in enumerate(vs)]])


def _hinge_dim_ref(x, v, d=0, m=1.0):
    a = x.reshape(x.shape[0], -1)
    slices = a.T if d == 0 else a  # one slice per column (d=0) or per row (d=1)
    return np.array([_hinge_vec(s, i, m) for s, i in zip(slices, v)])


def _bll_ref(x, y):
    lx = np.log(np.maximum(x, _FLT_MIN))
    l1x = np.log(np.maximum(1 - x, _FLT_MIN))
    return np.array([-np.sum(np.where(y != 0, y * lx, 0) + np.where(y != 1, (1 - y) * l1x, 0))])


def _huber_ref(x, y, c=1.345):
    a = np.abs(x - y)
    return np.array([np.sum(np.where(a < c, a * a, c * (2 * a - c)))])


def _sparsemax_vec(z):
    s = np.sort(z)[::-1]
    k = np.arange(1, z.size + 1)
    cs = np.cumsum(s)
    kk = k[1 + k * s > cs][-1]
    tau = (cs[kk - 1] - 1) / kk
    return np.maximum(z - tau, 0.0), tau


def _sparsemax_ref(x):
    return _sparsemax_vec(x.reshape(-1))[0].reshape(x.shape)


def _sparsemax_loss_ref(x, target_support):
    z = x.reshape(-1)
    p, tau = _sparsemax_vec(z)
    q = np.bincount(target_support, minlength=z.size) / len(target_support)
    s = p > 0
    loss = -q @ z + 0.5 * np.sum(z[s] ** 2 - tau**2) + 0.5 * q @ q
    return np.array([max(loss, 0.0)])


def _constrained_softmax_ref(x, y):
    z, u = x.reshape(-1), y.reshape(-1)
    e = np.exp(z - z.max())
    clipped = np.zeros(z.size, dtype=bool)
    s = 0.0
    while not clipped.all():  # grow the clipped set until no bound is violated
        s = (1 - u[clipped].sum()) / e[~clipped].sum()
        viol = ~clipped & (e * s > u)
        if not viol.any():
            break
        clipped |= viol
    return np.where(clipped, u, e * s).reshape(x.shape)


def _layer_norm_ref(x, g, b):
    return g * (x - x.mean()) / (x.std() + 1e-8) + b


def _one_hot_max(x, gradient_mode):
    out = np.zeros(x.size)
    out[np.argmax(x.reshape(-1))] = 1.0
    return out.reshape(x.shape)


# ---------------------------------------------------------------- margin losses


@op(
    formula="y = sum_{i != v} max(0, x_i - x_v + m)",
    batch="x must be unbatched: Dim {1} (use hinge_batch)",
    reference=lambda x, v, m=1.0: np.array([_hinge_vec(x, v, m)]),
    cases=[
        Case([(5,)], {"v": 2}, batches=("none",)),
        Case([(4, 1)], {"v": 0, "m": 0.5}, batches=("none",)),
    ],
    direct=_k.hinge,
)
def hinge(x, v, m=1.0):
    """Multiclass hinge loss of a score vector against the gold class v.

    Args:
        x: a vector expression (batch 1; a batched x raises ValueError, as
            in DyNet: use :func:`hinge_batch`).
        v: the gold index.
        m: the margin, >= 0.

    Example:
        >>> loss = dy.hinge(scores, gold, m=1.0)
    """


@op(
    formula="y_b = sum_{i != vs[b]} max(0, x_{b,i} - x_{b,vs[b]} + m)",
    batch="{1} x len(vs), not summed; x of batch 1 is shared by every index",
    reference=_hinge_batch_ref,
    batch_reference=True,
    cases=[
        Case([(5,)], lambda bs: {"vs": [(2 * b + 1) % 5 for b in range(bs)]}, batches=_ELEM_BATCHES),
        Case([(4,)], {"vs": [1, 3, 0], "m": 0.5}, batches=("none",)),
    ],
    direct=_k.hinge_batch,
)
def hinge_batch(x, vs, m=1.0):
    """Per batch element b, the hinge loss of x_b against vs[b]: a {1} x B
    loss (sum it with ``dy.sum_batches`` before backward).

    Args:
        x: a batched vector expression (batch len(vs), or 1 to share it).
        vs: one gold index per batch element (any iterable of ints).
        m: the margin, >= 0.

    Example:
        >>> loss = dy.sum_batches(dy.hinge_batch(scores, golds))
    """


@op(
    formula="y_j = sum_{i != v_j} max(0, x_{ij} - x_{v_j j} + m) over slices along d",
    batch="per element (the same indices for every batch element)",
    reference=_hinge_dim_ref,
    cases=[
        Case([(4, 3)], {"v": [0, 3, 1]}, batches=_ELEM_BATCHES),
        Case([(4, 3)], {"v": [2, 0, 1, 1], "d": 1, "m": 0.5}, batches=_ELEM_BATCHES),
    ],
    direct=_k.hinge_dim,
)
def hinge_dim(x, v, d=0, m=1.0):
    """Hinge loss of every column (d=0) or every row (d=1) of a matrix: a
    vector with one loss per slice.

    Args:
        x: an expression of at most 2 dimensions.
        v: one gold index per slice (per column for d=0, per row for d=1).
        d: the dimension the hinge runs along.
        m: the margin, >= 0.

    Example:
        >>> losses = dy.hinge_dim(scores, golds, d=0)   # scores: classes x words
    """


@op(
    formula="y = max(0, m - x + y), elementwise",
    batch="batch 1 broadcasts (DyNet: equal batch sizes only)",
    reference=lambda x, y, m=1.0: np.maximum(0.0, m - x + y),
    # |x| >= 0.5 and |y| < 0.2 with m = 0.1: the margin is clearly met or missed
    cases=[
        Case([(1,), (1,)], {"m": 0.1}, domain=("nonzero", (-0.2, 0.2))),
        Case([(1, 4), (1, 4)], {"m": 0.1}, domain=("nonzero", (-0.2, 0.2))),
    ],
    direct=_k.pairwise_rank_loss,
)
def pairwise_rank_loss(x, y, m=1.0):
    """Pairwise ranking loss max(0, m - x + y), elementwise, not summed.

    Args:
        x: scores that should be higher: a scalar or a row vector {1, n}.
        y: scores that should be lower, of x's dimensions.
        m: the margin.

    Example:
        >>> loss = dy.pairwise_rank_loss(score_good, score_bad, m=1.0)
    """


# ---------------------------------------------------------------- distances and likelihoods


@op(
    formula="y = -sum_i (t_i ln x_i + (1 - t_i) ln(1 - x_i)), logs clamped at ln(FLT_MIN)",
    batch="{1} x B (DyNet: unbatched only); batch 1 broadcasts",
    reference=_bll_ref,
    cases=[
        Case([(3, 2), (3, 2)], domain=[(0.05, 0.95), (0.0, 1.0)]),
        Case([(4,), (4,)], domain=[(0.05, 0.95), (0.0, 1.0)]),
    ],
    direct=_k.binary_log_loss,
)
def binary_log_loss(x, y):
    """Binary cross-entropy of probabilities x against targets y, summed.

    x = 0 or 1 gives a finite loss (the logs are clamped at ln(FLT_MIN), as
    DyNet does), and a term whose weight is 0 counts 0. Unlike DyNet, batches
    work: one loss per batch element.

    Example:
        >>> loss = dy.binary_log_loss(dy.logistic(score), dy.scalarInput(1.0))
    """


@op(
    formula="y = sum_i H_c(x_i - y_i), H_c(d) = d^2 if |d| < c else c (2|d| - c)",
    batch="{1} x B (DyNet: unbatched only); batch 1 broadcasts",
    reference=_huber_ref,
    cases=[
        Case([(3, 2), (3, 2)]),
        Case([(4,), (4,)], {"c": 0.5}),
    ],
    direct=_k.huber_distance,
)
def huber_distance(x, y, c=1.345):
    """Huber distance: squared for small differences, linear for large ones
    (DyNet's scale: d^2 inside, c (2|d| - c) outside, continuous slope).

    Example:
        >>> loss = dy.huber_distance(prediction, target, c=1.0)
    """


@op(
    formula="y = sum_i |x_i - y_i|",
    batch="{1} x B (DyNet: unbatched only); batch 1 broadcasts",
    reference=lambda x, y: np.array([np.sum(np.abs(x - y))]),
    # |x| >= 0.5 and |y| < 0.2: no difference near the kink at 0
    cases=[
        Case([(3, 2), (3, 2)], domain=("nonzero", (-0.2, 0.2))),
        Case([(4,), (4,)], domain=("nonzero", (-0.2, 0.2))),
    ],
    direct=_k.l1_distance,
)
def l1_distance(x, y):
    """L1 distance sum_i |x_i - y_i|; the gradient at 0 is 0.

    Example:
        >>> loss = dy.l1_distance(prediction, target)
    """


@op(
    formula="y = exp(l) - x l + ln(x!), l = log_lambda",
    batch="per element: each batch element of log_lambda against the same x",
    reference=lambda ll, x: np.exp(ll) - x * ll + math.lgamma(x + 1),
    cases=[
        Case([(1,)], {"x": 3}, batches=_ELEM_BATCHES),
        Case([(1,)], {"x": 0}, batches=_ELEM_BATCHES),
    ],
)
def poisson_loss(log_lambda, x):
    """Negative log-likelihood of the count x under a Poisson distribution
    with log-rate log_lambda.

    Args:
        log_lambda: a single-element expression (batched: one rate per
            batch element, DyNet accepts batch 1 only).
        x: the observed count, a non-negative integer.

    Example:
        >>> loss = dy.poisson_loss(W * h + b, 4)
    """
    name = "poisson_loss"
    try:
        k = _check.integer(x, name, "x")
    except TypeError:
        raise TypeError("%s: x must be a non-negative integer, got %s" % (name, _check._show(x))) from None
    if k < 0:
        raise ValueError("%s: x must be a non-negative integer, got %d" % (name, k))
    return _k.poisson_loss(log_lambda, float(k), math.lgamma(k + 1.0))


# ---------------------------------------------------------------- sparse probability maps


@op(
    formula="y = argmin_{p in simplex} |p - x|^2 = max(x - tau, 0)",
    batch="per element (DyNet: unbatched only)",
    reference=_sparsemax_ref,
    cases=[Case([(5,)], batches=_ELEM_BATCHES), Case([(4, 1)], batches=_ELEM_BATCHES)],
    direct=_k.sparsemax,
)
def sparsemax(x):
    """Sparsemax (Martins & Astudillo 2016): the Euclidean projection of x on
    the probability simplex, exactly zero outside a support. Backward:
    gy - mean(gy) on the support, 0 elsewhere.

    Args:
        x: a vector expression; each batch element is projected separately.

    Example:
        >>> attention = dy.sparsemax(scores)
    """


@op(
    formula="y = -q.x + 1/2 sum_{j in S(x)} (x_j^2 - tau^2) + 1/2 |q|^2, q uniform on the targets",
    batch="{1} x B: each batch element against the same target_support",
    reference=_sparsemax_loss_ref,
    cases=[
        Case([(5,)], {"target_support": [1, 3]}, batches=_ELEM_BATCHES),
        Case([(4,)], {"target_support": [2]}, batches=_ELEM_BATCHES),
    ],
    direct=_k.sparsemax_loss,
)
def sparsemax_loss(x, target_support):
    """Sparsemax loss (Martins & Astudillo 2016) of scores x against the
    uniform distribution q on ``target_support``; its gradient is
    sparsemax(x) - q, and it is 0 exactly when sparsemax(x) = q.

    Args:
        x: a vector expression.
        target_support: the gold indices (non-empty; a repeated index counts
            twice in q).

    Example:
        >>> loss = dy.sparsemax_loss(scores, [gold])
    """


@op(
    formula="y = argmin_{p in simplex, p <= u} KL(p || softmax(x)): min(u_i, e^{x_i} s), sum = 1",
    batch="per element (DyNet: unbatched only); batch 1 broadcasts",
    reference=_constrained_softmax_ref,
    cases=[
        Case([(4,), (4,)], domain=("real", (0.3, 0.7))),
        Case([(5,), (5,)], domain=("real", (0.25, 0.5))),
    ],
    direct=_k.constrained_softmax,
)
def constrained_softmax(x, y):
    """Constrained softmax (Martins & Kreutzer 2017): the softmax of x with
    upper bounds y on the probabilities. Entries at their bound get gradient
    through y only, the others through x only.

    Args:
        x: a vector of scores.
        y: the upper bounds, x's dimensions; sum(y) >= 1 for a solution (if
            sum(y) < 1, every entry is at its bound).

    Example:
        >>> attention = dy.constrained_softmax(scores, 1 - used_attention)
    """


# ---------------------------------------------------------------- normalisation


@op(
    formula="y = g * (x - mean(x)) / (std(x) + 1e-8) + b, population std over each batch element",
    batch="x per element; g, b unbatched (batched g, b: per element)",
    reference=_layer_norm_ref,
    cases=[Case([(4,), (4,), (4,)]), Case([(3, 2), (3, 2), (3, 2)])],
    direct=_k.layer_norm,
)
def layer_norm(x, g, b):
    """Layer normalisation (Ba et al. 2016) over all elements of each batch
    element, with gain g and bias b of x's dimensions.

    Example:
        >>> h = dy.layer_norm(W * x, gain, bias)
    """


@op(
    formula="y = g w / |w|_2, g a single element",
    batch="per element (DyNet: unbatched only); batch 1 broadcasts",
    reference=lambda w, g: g[0] * w / np.sqrt(np.sum(w * w)),
    cases=[Case([(3, 2), (1,)]), Case([(4,), (1,)])],
    direct=_k.weight_norm,
)
def weight_norm(w, g):
    """Weight normalisation (Salimans & Kingma 2016): w rescaled to norm g.
    A zero w gives zeros (and no gradient) rather than NaN.

    Example:
        >>> W = dy.weight_norm(dy.parameter(V), dy.parameter(g))
    """


# ---------------------------------------------------------------- gradient flow


@op(
    formula="y = x; dy/dx = -1",
    batch="per element",
    reference=lambda x: x,
    # backward is -1 by design, which finite differences cannot agree with:
    # tested in tests/ops/test_loss_errors.py
    cases=[Case([(3, 2)], batches=_ELEM_BATCHES, grad=False)],
    direct=_k.flip_gradient,
)
def flip_gradient(x):
    """Identity in forward; the gradient flowing back is negated (gradient
    reversal, Ganin & Lempitsky 2015).

    Example:
        >>> domain_scores = classifier(dy.flip_gradient(features))
    """


@op(
    formula="y = x; dy/dx = lambd",
    batch="per element",
    reference=lambda x, lambd=1.0: x,
    cases=[
        Case([(3, 2)], {"lambd": 1.0}, batches=_ELEM_BATCHES),
        # lambd != 1 differs from finite differences by design (own test)
        Case([(4,)], {"lambd": 0.5}, batches=_ELEM_BATCHES, grad=False),
    ],
    direct=_k.scale_gradient,
)
def scale_gradient(x, lambd=1.0):
    """Identity in forward; the gradient flowing back is multiplied by lambd.

    Example:
        >>> h = dy.scale_gradient(h, 0.1)
    """


@op(
    formula="y = onehot(argmax_i x_i); dy/dx = 0 or (straight-through) 1",
    batch="per element",
    reference=_one_hot_max,
    cases=[
        # piecewise constant: finite differences are 0, as zero_gradient's backward
        Case([(5,)], {"gradient_mode": "zero_gradient"}, batches=_ELEM_BATCHES),
        # straight-through differs from finite differences by design (own test)
        Case([(4, 1)], {"gradient_mode": "straight_through_gradient"}, batches=_ELEM_BATCHES, grad=False),
    ],
    direct=_k.argmax,
)
def argmax(x, gradient_mode):
    """One-hot vector of the (first) maximum of x.

    Args:
        x: a vector expression (each batch element separately).
        gradient_mode: 'zero_gradient' (no gradient flows back) or
            'straight_through_gradient' (the gradient passes as through the
            identity).

    Example:
        >>> choice = dy.argmax(scores, gradient_mode="straight_through_gradient")
    """
