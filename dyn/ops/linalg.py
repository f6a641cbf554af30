"""Linear algebra, circular convolution, n-gram sums and to_device (defined in
dyn/_core/ops/linalg.pyx; the fused LSTM nodes are in rnn.py)."""

from __future__ import annotations

import numpy as np

from dyn._core.ops import linalg as _k
from dyn.ops._registry import Case, op

_NONE = ("none",)  # DyNet runs these on unbatched tensors only
_SAME = ("none", "all")  # arguments must have equal batch sizes


# ---------------------------------------------------------------- matrix and tensor products


@op(
    formula="y_ij = x_ij + v_i",
    batch="batch 1 broadcasts",
    reference=lambda x, y: x + y.reshape(-1, 1),
    cases=[Case([(3, 4), (3,)]), Case([(2, 1), (2,)]), Case([(4, 2), (4, 1)], batches=_SAME)],
    direct=_k.colwise_add,
)
def colwise_add(x, y):
    """Add the vector y (M) to every column of the M x N matrix x.

    Example:
        >>> scores = dy.colwise_add(W * H, b)
    """


def _c31_ref(x, y, b=None):
    out = np.tensordot(x, y.reshape(-1), axes=([2], [0]))
    return out if b is None else out + b.reshape(out.shape)


@op(
    formula="z_ij = sum_k x_ijk y_k",
    batch="batch 1 broadcasts",
    reference=_c31_ref,
    cases=[Case([(2, 3, 4), (4,)]), Case([(3, 1, 2), (2,)], batches=_SAME)],
    direct=_k.contract3d_1d,
)
def contract3d_1d(x, y):
    """Contract the third dimension of the 3-d tensor x {I,J,K} with the vector
    y {K}: an I x J matrix.

    Example:
        >>> M = dy.contract3d_1d(T, v)
    """


@op(
    formula="z_ij = sum_k x_ijk y_k + b_ij",
    batch="batch 1 broadcasts",
    reference=_c31_ref,
    cases=[Case([(2, 3, 4), (4,), (2, 3)])],
    direct=_k.contract3d_1d_bias,
)
def contract3d_1d_bias(x, y, b):
    """contract3d_1d(x, y) + b for a bias b {I,J}.

    Example:
        >>> M = dy.contract3d_1d_bias(T, v, B)
    """


def _c311_ref(x, y, z, b=None):
    out = np.einsum("ijk,k,j->i", x, y.reshape(-1), z.reshape(-1))
    return out if b is None else out + b.reshape(-1)


@op(
    formula="t_i = sum_jk x_ijk y_k z_j",
    batch="unbatched only (as DyNet)",
    reference=_c311_ref,
    cases=[Case([(2, 3, 4), (4,), (3,)], batches=_NONE), Case([(3, 2, 1), (1,), (2,)], batches=_NONE)],
    direct=_k.contract3d_1d_1d,
)
def contract3d_1d_1d(x, y, z):
    """Contract the 3-d tensor x {I,J,K} with y {K} (third dimension) and z {J}
    (second): a vector {I}.

    Example:
        >>> t = dy.contract3d_1d_1d(T, u, v)
    """


@op(
    formula="t_i = sum_jk x_ijk y_k z_j + b_i",
    batch="unbatched only (as DyNet)",
    reference=_c311_ref,
    cases=[Case([(2, 3, 4), (4,), (3,), (2,)], batches=_NONE)],
    direct=_k.contract3d_1d_1d_bias,
)
def contract3d_1d_1d_bias(x, y, z, b):
    """contract3d_1d_1d(x, y, z) + b for a bias b {I}.

    Example:
        >>> t = dy.contract3d_1d_1d_bias(T, u, v, b)
    """


# ---------------------------------------------------------------- square matrices
# Gradients are checked in test_linalg_errors.py on well-conditioned inputs:
# the generated and hypothesis-drawn matrices can be near singular, where
# finite differences are meaningless.
_SQUARE = [
    Case([(3, 3)], batches=_NONE, grad=False),
    Case([(2, 2)], batches=_NONE, grad=False),
    Case([(4, 4)], batches=_NONE, grad=False),
    Case([(1, 1)], batches=_NONE, grad=False),
]


@op(
    formula="Y = X^-1; dX = -Y^T dY Y^T",
    batch="unbatched only (as DyNet)",
    reference=np.linalg.inv,
    cases=_SQUARE,
    direct=_k.inverse,
)
def inverse(x):
    """Inverse of a square matrix (LU with partial pivoting; a singular matrix
    gives inf/nan entries).

    Example:
        >>> Sinv = dy.inverse(S)
    """


@op(
    formula="y = log |det X|; dX = X^-T",
    batch="unbatched only (as DyNet)",
    reference=lambda x: np.array([np.linalg.slogdet(x)[1]]),
    cases=_SQUARE,
    direct=_k.logdet,
)
def logdet(x):
    """Log of the absolute determinant of a square matrix, {1} (DyNet's
    returns NaN for a negative determinant; this returns log|det|).

    Example:
        >>> nll = 0.5 * dy.logdet(Sigma) + ...
    """


@op(
    formula="y = tr(x y^T) = sum_ij x_ij y_ij",
    batch="unbatched only (as DyNet)",
    reference=lambda x, y: np.array([np.sum(x * y)]),
    cases=[Case([(3, 4), (3, 4)], batches=_NONE), Case([(5,), (5,)], batches=_NONE)],
    direct=_k.trace_of_product,
)
def trace_of_product(x, y):
    """trace(x y^T) of two same-shaped tensors, {1}.

    Example:
        >>> t = dy.trace_of_product(A, B)
    """


# ---------------------------------------------------------------- sequence filters


def _circ_ref(u, v, sign):
    a, b, n = u.reshape(-1), v.reshape(-1), u.shape[0]
    return np.array([sum(a[i] * b[(sign * i + k) % n] for i in range(n)) for k in range(n)]).reshape(u.shape)


# a column vector {n,1} counts as a vector {n} (DyNet's LooksLikeVector); the
# unequal shapes also keep these out of test_hypothesis.py, whose drawn
# shapes and batches these unbatched vector ops reject too often
_CIRC = [
    Case([(5,), (5, 1)], batches=_NONE),
    Case([(4, 1), (4,)], batches=_NONE),
    Case([(1,), (1, 1)], batches=_NONE),
]


@op(
    formula="y_k = sum_i u_i v_((k - i) mod n)",
    batch="unbatched only (as DyNet)",
    reference=lambda u, v: _circ_ref(u, v, -1),
    cases=_CIRC,
    direct=_k.circ_conv,
)
def circ_conv(u, v):
    """Circular convolution of two vectors of the same size.

    Example:
        >>> bound = dy.circ_conv(role, filler)
    """


@op(
    formula="y_k = sum_i u_i v_((i + k) mod n)",
    batch="unbatched only (as DyNet)",
    reference=lambda u, v: _circ_ref(u, v, 1),
    cases=_CIRC,
    direct=_k.circ_corr,
)
def circ_corr(u, v):
    """Circular correlation of two vectors of the same size (the inverse
    binding of circ_conv in holographic representations).

    Example:
        >>> filler = dy.circ_corr(role, bound)
    """


def _kmh_ref(x, n):
    return np.stack([x[:, j : j + n].sum(axis=1) for j in range(x.shape[1] - n + 1)], axis=1)


@op(
    formula="y_:j = sum_{k<n} x_:(j+k)",
    batch="unbatched only (as DyNet)",
    reference=_kmh_ref,
    cases=[
        Case([(3, 5)], {"n": 2}, batches=_NONE),
        Case([(2, 4)], {"n": 4}, batches=_NONE),
        Case([(2, 3)], {"n": 1}, batches=_NONE),
    ],
    direct=_k.kmh_ngram,
)
def kmh_ngram(x, n):
    """n-gram sums of the columns of a matrix: column j of the result is the sum
    of columns j .. j+n-1 of x (cols - n + 1 columns).

    Example:
        >>> bigrams = dy.kmh_ngram(embeddings, 2)
    """


@op(
    formula="y = x (copied to the device)",
    batch="per element",
    reference=lambda x, device_str: x,
    cases=[Case([(3, 2)], {"device_str": "CPU"}, batches=_SAME)],
    direct=_k.to_device,
)
def to_device(e, device_str):
    """Copy an expression to a device ('CPU', 'GPU:0'). A graph's nodes run on
    the graph's device (``dyn.init(devices=...)``): the device named must be
    available, and the result is a copy on the graph's device (gradients pass
    through), so DyNet programs that move expressions between devices run
    unchanged. An unknown device is a ValueError; a GPU this machine lacks, a
    RuntimeError saying what is missing.

    Example:
        >>> y = dy.to_device(x, "CPU")
    """
