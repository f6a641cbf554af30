"""Reductions and moments (compiled in dyn/_core/ops/reduce.pyx and dyn/_core/cpu/reduce.pyx).

One compiled kernel reduces any set of dims (and/or the batch) of a tensor of
up to 7 dims; sums, means, moments, standard deviations, max/min and
log-sum-exp differ only in what they accumulate. DyNet limits several of
these to tensors of order <= 3 and at most two reduced dims; dyn does not.

DyNet's signatures and quirks are kept: ``d`` of the ``*_dim`` moments must
be a real list; ``sum_dim`` ignores ``n``; ``std_dim`` always divides by the
number of reduced elements; ``mean_dim``/``moment_dim`` divide by ``n`` when
``n > 0`` (for masked batches). ``sum_elems`` and ``sum_batches`` live in
arith.
"""

from __future__ import annotations

import numpy as np

from dyn._core.ops import reduce as _k
from dyn.ops._check import flag as _flag
from dyn.ops._check import integer as _int
from dyn.ops._registry import Case, op


def _dims(d, name):
    """d as given (the kernel wants a list, as DyNet), each entry an integer."""
    if isinstance(d, list):
        for v in d:
            if type(v) is not int:
                _int(v, name, "each entry of d")
    return d


# ---------------------------------------------------------------- references


def _over(x, d, b, fn):
    """fn(x, axes) (keepdims) over dims d, and the batch if b; x has a trailing
    batch axis. Shaped as DyNet's result: reduced dims removed ({1} if none left)."""
    nd = x.ndim - 1
    y = fn(x, tuple(d) + ((nd,) if b else ()))
    shape = tuple(x.shape[k] for k in range(nd) if k not in d) or (1,)
    return y.reshape(shape + (y.shape[-1],))


def _count(x, d, b):
    return int(np.prod([x.shape[k] for k in d])) * (x.shape[-1] if b else 1)


def _moment_ref(x, d, r, b, n=0):
    return _over(x, d, b, lambda a, ax: np.sum(a**r, axis=ax, keepdims=True)) / (n or _count(x, d, b))


def _one(y):
    """A reduced per-example array as DyNet shapes it: {1} when no dim is left."""
    y = np.asarray(y)
    return y.reshape(1) if y.ndim == 0 else y


def _lse(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    return np.squeeze(m, axis=axis) + np.log(np.sum(np.exp(x - m), axis=axis))


def _fold_ref(x, nrows=2):
    rows = x.shape[0]
    x = x.reshape(rows, -1)
    return x.reshape(rows // nrows, nrows, x.shape[1]).sum(axis=1)


def _kmax_ref(x, k, d=1):
    top = np.sort(np.argsort(-x, axis=d, kind="stable").take(range(k), axis=d), axis=d)
    return np.take_along_axis(x, top, axis=d)


# shapes for the per-element reductions: a vector, a matrix, a 3-D tensor
_SHAPES = [(5,), (3, 4), (2, 3, 2)]

# ---------------------------------------------------------------- along dims (+ batch)


@op(
    formula="y = sum_{i in dims d (and the batch if b)} x_i",
    batch="per element; b=True also sums over the batch (result batch 1)",
    reference=lambda x, d, b=False, n=0: _over(x, d, b, lambda a, ax: a.sum(axis=ax, keepdims=True)),
    batch_reference=True,
    cases=[
        Case([(3, 4)], {"d": [0]}),
        Case([(3, 4)], {"d": [1]}),
        Case([(2, 3, 4)], {"d": [0, 2]}),
        Case([(2, 3, 4)], {"d": [1]}),
        Case([(2, 3, 4)], {"d": [0, 1, 2]}),
        Case([(3, 4)], {"d": [1], "b": True}),
        Case([(3, 4)], {"d": [], "b": True}),
        Case([(5,)], {"d": [0], "n": 7}),
    ],
    direct=_k.sum_dim,
)
def sum_dim(x, d, b=False, n=0):
    """Sum over the dims listed in ``d`` (removed from the result), and over
    the batch when ``b``. ``n`` is accepted and ignored, as in DyNet.

    Args:
        x: the expression.
        d: a list of dims to reduce (a tuple is a TypeError, as in DyNet).
        b: also reduce the batch (result batch size 1).
        n: ignored.

    Example:
        >>> col_sums = dy.sum_dim(M, [0])        # {3,4} -> {4}
    """


@op(
    formula="y = (1/N) sum_{i in dims d (and batch if b)} x_i; N = n if n > 0 else the count",
    batch="per element; b=True also averages over the batch (result batch 1)",
    reference=lambda x, d, b, n=0: _moment_ref(x, d, 1, b, n),
    batch_reference=True,
    cases=[
        Case([(3, 4)], {"d": [0], "b": False}),
        Case([(2, 3, 4)], {"d": [0, 2], "b": False}),
        Case([(2, 3, 4)], {"d": [1], "b": True}),
        Case([(3, 4)], {"d": [1], "b": False, "n": 6}),
        Case([(3, 4)], {"d": [], "b": True}),
    ],
)
def mean_dim(x, d, b, n=0):
    """Mean over the dims in ``d`` (and the batch when ``b``).

    With ``n > 0`` the sum is divided by ``n`` instead of the number of reduced
    elements (averaging a padded, masked batch over its real length).

    Example:
        >>> avg = dy.mean_dim(H, [1], False)     # mean of the columns of H
    """
    return _k.moment_dim(
        x, _dims(d, "mean_dim"), 1, _flag(b, "mean_dim", "b"), _int(n, "mean_dim", "n"), True
    )


@op(
    formula="y = sqrt((1/N) sum_i (x_i - mean)^2) over dims d (and batch if b); N the count",
    batch="per element; b=True also over the batch (result batch 1)",
    reference=lambda x, d, b, n=0: _over(x, d, b, lambda a, ax: np.std(a, axis=ax, keepdims=True)),
    batch_reference=True,
    cases=[
        Case([(3, 4)], {"d": [0], "b": False}),
        Case([(3, 4)], {"d": [1], "b": False}),
        Case([(2, 3, 4)], {"d": [0, 2], "b": False}),
        Case([(3, 4)], {"d": [0], "b": True}),
        Case([(4, 2)], {"d": [0], "b": False, "n": 3}),
    ],
)
def std_dim(x, d, b, n=0):
    """Population standard deviation over the dims in ``d`` (and the batch
    when ``b``). As DyNet's Python API does, ``n`` is ignored: the divisor is
    always the number of reduced elements.

    Example:
        >>> s = dy.std_dim(H, [1], False)
    """
    _int(n, "std_dim", "n")  # ignored, but must be an integer
    return _k.std_dim(x, _dims(d, "std_dim"), _flag(b, "std_dim", "b"))


@op(
    formula="y = (1/N) sum_{i in dims d (and batch if b)} x_i^r; N = n if n > 0 else the count",
    batch="per element; b=True also over the batch (result batch 1)",
    reference=_moment_ref,
    batch_reference=True,
    cases=[
        Case([(3, 4)], {"d": [0], "r": 2, "b": False}),
        Case([(2, 3, 4)], {"d": [2, 0], "r": 3, "b": False}),
        Case([(3, 4)], {"d": [1], "r": 3, "b": True}),
        Case([(3, 4)], {"d": [1], "r": 2, "b": False, "n": 5}),
        Case([(4,)], {"d": [0], "r": 1, "b": False}),
    ],
)
def moment_dim(x, d, r, b, n=0):
    """The r-th raw moment (1/N) sum x^r over the dims in ``d`` (and the batch
    when ``b``); ``r >= 1``; ``n > 0`` overrides the divisor N.

    Example:
        >>> m2 = dy.moment_dim(H, [0], 2, False)
    """
    name = "moment_dim"
    return _k.moment_dim(x, _dims(d, name), _int(r, name, "r"), _flag(b, name, "b"), _int(n, name, "n"))


@op(
    formula="y = max_{i along dim d} x_i",
    batch="per element",
    reference=lambda x, d=0: _one(np.max(x, axis=d)),
    cases=[
        Case([(3, 4)], {"d": 0}),
        Case([(3, 4)], {"d": 1}),
        Case([(2, 3, 4)], {"d": 1}),
        Case([(2, 3, 4)], {"d": 2}),
        Case([(5,)], {}),
    ],
)
def max_dim(x, d=0):
    """Maximum along dim ``d`` (removed from the result). The gradient goes to
    the maximal element (the first one on ties).

    Example:
        >>> pooled = dy.max_dim(H, 1)            # max over time of {n, T}
    """
    return _k.max_dim(x, _int(d, "max_dim", "d"), False)


@op(
    formula="y = min_{i along dim d} x_i",
    batch="per element",
    reference=lambda x, d=0: _one(np.min(x, axis=d)),
    cases=[
        Case([(3, 4)], {"d": 0}),
        Case([(3, 4)], {"d": 1}),
        Case([(2, 3, 4)], {"d": 0}),
        Case([(5,)], {}),
    ],
)
def min_dim(x, d=0):
    """Minimum along dim ``d`` (removed from the result); the gradient goes to
    the minimal element (the first one on ties).

    Example:
        >>> lo = dy.min_dim(M, 0)
    """
    return _k.max_dim(x, _int(d, "min_dim", "d"), True)


@op(
    formula="y = log sum_{i along dim d} exp(x_i)",
    batch="per element",
    reference=lambda x, d=0: _one(_lse(x, d)),
    cases=[
        Case([(3, 4)], {"d": 0}),
        Case([(3, 4)], {"d": 1}),
        Case([(2, 3, 4)], {"d": 2}),
        Case([(5,)], {}),
    ],
)
def logsumexp_dim(x, d=0):
    """log(sum(exp(x))) along dim ``d`` (removed), computed stably around the max.

    Example:
        >>> log_z = dy.logsumexp_dim(scores)     # one value per column
    """
    return _k.logsumexp_dim(x, _int(d, "logsumexp_dim", "d"))


# ---------------------------------------------------------------- whole batch elements


@op(
    formula="y = (1/n) sum_i x_i (n elements)",
    batch="per element: {1} x B",
    reference=lambda x: np.array([x.mean()]),
    cases=[Case([s], batches=("none", "all")) for s in _SHAPES],
)
def mean_elems(x):
    """Mean of all elements of each batch element.

    Example:
        >>> m = dy.mean_elems(h)
    """
    return _k.moment_elems(x, 1, True)


@op(
    formula="y = sqrt((1/n) sum_i (x_i - mean)^2)",
    batch="per element: {1} x B",
    reference=lambda x: np.array([x.std()]),
    cases=[Case([s], batches=("none", "all")) for s in _SHAPES],
    direct=_k.std_elems,
)
def std_elems(x):
    """Population standard deviation of the elements of each batch element.

    Example:
        >>> s = dy.std_elems(h)
    """


@op(
    formula="y = (1/n) sum_i x_i^r",
    batch="per element: {1} x B",
    reference=lambda x, r: np.array([np.mean(x**r)]),
    cases=[Case([s], {"r": r}, batches=("none", "all")) for s, r in zip(_SHAPES, (2, 3, 1))],
)
def moment_elems(x, r):
    """The r-th raw moment (1/n) sum x^r of each batch element (r >= 1).

    Example:
        >>> m2 = dy.moment_elems(h, 2)
    """
    return _k.moment_elems(x, _int(r, "moment_elems", "r"))


@op(
    formula="y_k = sum_{j <= k along dim d} x_j",
    batch="per element",
    reference=lambda x, d=0: np.cumsum(x, axis=d),
    cases=[
        Case([(3, 4)], {"d": 0}),
        Case([(3, 4)], {"d": 1}),
        Case([(2, 3, 4)], {"d": 1}),
        Case([(5,)], {}),
    ],
)
def cumsum(x, d=0):
    """Cumulative (inclusive) sum along dim ``d``; same shape as ``x``.

    Example:
        >>> c = dy.cumsum(v)                     # [1, 2, 3] -> [1, 3, 6]
    """
    return _k.cumsum(x, _int(d, "cumsum", "d"))


@op(
    formula="y_i = sum_{j < nrows} x_{i nrows + j, :}",
    batch="per element",
    reference=_fold_ref,
    cases=[
        Case([(6, 2)], {}),
        Case([(6,)], {"nrows": 3}),
        Case([(4, 3)], {"nrows": 4}),
        Case([(3, 2)], {"nrows": 1}),
    ],
)
def fold_rows(x, nrows=2):
    """Sum each group of ``nrows`` consecutive rows: a {r, c} input gives
    {r / nrows, c} (always a matrix, as in DyNet). Unlike DyNet, batched
    inputs are folded per batch element.

    Example:
        >>> y = dy.fold_rows(x, 2)               # {6, 2} -> {3, 2}
    """
    return _k.fold_rows(x, _int(nrows, "fold_rows", "nrows"))


@op(
    formula="y = the k largest x_i along dim d, in their original order",
    batch="per element",
    reference=_kmax_ref,
    cases=[
        Case([(3, 6)], {"k": 2}),
        Case([(5, 3)], {"k": 3, "d": 0}),
        Case([(2, 5, 3)], {"k": 2, "d": 1}),
        Case([(2, 3, 4)], {"k": 4, "d": 2}),
    ],
)
def kmax_pooling(x, k, d=1):
    """k-max pooling: along dim ``d`` keep the ``k`` largest values, in the
    order they appear; the gradient flows back to them.

    Example:
        >>> y = dy.kmax_pooling(conv, 3)         # {n, T} -> {n, 3}
    """
    return _k.kmax_pooling(x, _int(k, "kmax_pooling", "k"), _int(d, "kmax_pooling", "d"))


# ---------------------------------------------------------------- over the batch


@op(
    formula="y = (1/B) sum_b x_b",
    batch="averages over the batch: result batch 1",
    reference=lambda x: x.mean(axis=-1, keepdims=True),
    batch_reference=True,
    cases=[Case([s], batches=("none", "all")) for s in _SHAPES],
)
def mean_batches(x):
    """Mean over the batch dimension.

    Example:
        >>> loss = dy.mean_batches(losses)
    """
    return _k.moment_batches(x, 1, True)


@op(
    formula="y = sqrt((1/B) sum_b (x_b - mean_b x)^2)",
    batch="over the batch: result batch 1",
    reference=lambda x: x.std(axis=-1, keepdims=True),
    batch_reference=True,
    cases=[Case([s], batches=("none", "all")) for s in _SHAPES],
    direct=_k.std_batches,
)
def std_batches(x):
    """Population standard deviation over the batch dimension.

    Example:
        >>> s = dy.std_batches(h)
    """


@op(
    formula="y = (1/B) sum_b x_b^r",
    batch="over the batch: result batch 1",
    reference=lambda x, r: np.mean(x**r, axis=-1, keepdims=True),
    batch_reference=True,
    cases=[Case([s], {"r": r}, batches=("none", "all")) for s, r in zip(_SHAPES, (2, 3, 1))],
)
def moment_batches(x, r):
    """The r-th raw moment (1/B) sum_b x_b^r over the batch dimension (r >= 1).

    Example:
        >>> m2 = dy.moment_batches(h, 2)
    """
    return _k.moment_batches(x, _int(r, "moment_batches", "r"))
