"""Arithmetic operations (compiled in dyn/_core/ops/arith.pyx and dyn/_core/cpu/arith.pyx)."""

from __future__ import annotations

import numpy as np

from dyn._core.core.expr import Expression
from dyn._core.ops import arith as _k
from dyn.ops._registry import Case, op


def _mat(a):
    """A DyNet vector {n} is an n x 1 matrix."""
    return a.reshape(a.shape[0], -1) if a.ndim < 2 else a


def _matmul_ref(x, y):
    out = _mat(x) @ _mat(y)
    return out.reshape(-1) if y.ndim == 1 else out


_BCAST = [Case([(3, 2), (3, 2)]), Case([(3, 2), (1, 2)]), Case([(3, 1), (3, 4)]), Case([(4,), (4,)])]


@op(
    formula="z = x + y (each dim equal or 1)",
    batch="batch 1 broadcasts",
    reference=np.add,
    cases=_BCAST,
    name="+",
)
def _add(x, y):
    """x + y: elementwise sum with broadcasting, or x + number."""
    return _k.add(x, y)


@op(
    formula="z = x - y (each dim equal or 1)",
    batch="batch 1 broadcasts",
    reference=np.subtract,
    cases=_BCAST,
    name="-",
)
def _sub(x, y):
    """x - y: elementwise difference with broadcasting, or with a number."""
    return _k.sub(x, y)


@op(
    formula="z = x y (matrix product)",
    batch="either side batch 1 broadcasts; else per element",
    reference=_matmul_ref,
    name="*",
    cases=[Case([(3, 4), (4,)]), Case([(3, 4), (4, 2)]), Case([(3,), (1, 2)]), Case([(2, 3), (3, 1)])],
)
def _mul(x, y):
    """x * y: matrix product of two expressions, or scaling by a number."""
    return _k.mul(x, y)


@op(
    formula="z = x * a + c for numbers a, c",
    batch="per element",
    reference=lambda x, a, c: x * a + c,
    cases=[
        Case([(3, 2)], {"a": -1.5, "c": 0.25}, batches=("none", "all")),
        Case([(4,)], {"a": 2.0, "c": 0.0}, batches=("none", "all")),
    ],
    direct=_k.scalar_affine,
)
def scalar_affine(x, a, c):
    """x * a + c elementwise for numbers a and c: what x + 2, 2 - x, x * 3, x / 4
    and -x build (one node each)."""


def _neg(x):
    return _k.neg(x)


def _div(x, y):
    return _k.div(x, y)


@op(
    formula="z_i = x_i y_i (each dim equal or 1)",
    batch="batch 1 broadcasts",
    reference=np.multiply,
    cases=_BCAST,
    direct=_k.cmult,
)
def cmult(x, y):
    """Elementwise (Hadamard) product with broadcasting.

    Example:
        >>> h = dy.cmult(gate, candidate)
    """


@op(
    formula="z_i = x_i / y_i (y's dims equal or 1)",
    batch="y batch 1 broadcasts",
    reference=np.divide,
    cases=[
        Case([(3, 2), (3, 2)], domain=("real", "nonzero"), batches=("none", "all", "bcast1")),
        Case([(3, 2), (1, 2)], domain=("real", "nonzero"), batches=("none", "all")),
        Case([(3, 2), (3, 2)], domain=("real", "nonzero"), batches=("none", "all")),
    ],
    direct=_k.cdiv,
)
def cdiv(x, y):
    """Elementwise division x / y; only y may broadcast."""


@op(
    formula="z = sum_i x_i y_i",
    batch="batch 1 broadcasts",
    reference=lambda x, y: np.array([np.sum(x * y)]),
    cases=[Case([(5,), (5,)]), Case([(2, 3), (2, 3)])],
    direct=_k.dot_product,
)
def dot_product(x, y):
    """Dot product of two same-shaped expressions: {1} per batch element."""


def _affine_ref(*xs):
    out = xs[0] if xs[0].ndim == 1 or len(xs) == 1 else xs[0].copy()
    for w, x in zip(xs[1::2], xs[2::2]):
        prod = _matmul_ref(w, x)
        out = out + (prod if prod.ndim >= out.ndim else prod.reshape(out.shape))
    return out


@op(
    formula="y = b + sum_k W_k x_k",
    batch="any argument batch 1 broadcasts",
    reference=_affine_ref,
    list_input=True,
    cases=[
        Case([(3,), (3, 4), (4,)]),
        Case([(3,), (3, 4), (4,), (3, 2), (2,)]),
        Case([(3, 1), (3, 4), (4, 1)]),
        Case([(3,)]),
    ],
    direct=_k.affine_transform,
)
def affine_transform(exprs):
    """b + W1 x1 + W2 x2 + ...: the fused linear layer, one node.

    Args:
        exprs: a list [b, W1, x1, W2, x2, ...].

    Example:
        >>> h = dy.tanh(dy.affine_transform([b, W, x]))
    """


@op(
    formula="y = sum_k x_k",
    batch="batch 1 broadcasts",
    reference=lambda *xs: sum(xs),
    list_input=True,
    cases=[Case([(3, 2), (3, 2), (3, 2)]), Case([(4,)])],
    direct=_k.esum,
)
def esum(xs):
    """Sum of a list of same-shaped expressions."""


@op(
    formula="y = (1/n) sum_k x_k",
    batch="batch 1 broadcasts",
    reference=lambda *xs: sum(xs) / len(xs),
    list_input=True,
    cases=[Case([(3, 2), (3, 2), (3, 2)]), Case([(4,), (4,)])],
)
def average(xs):
    """Mean of a list of same-shaped expressions (esum then a scale)."""
    if not isinstance(xs, list):
        raise TypeError("average: expected a list of expressions, got %s" % type(xs).__name__)
    if not xs:
        raise ValueError("average: empty list of expressions")
    for k, x in enumerate(xs):
        if not isinstance(x, Expression):
            raise TypeError(
                "average: element %d of the list is a %s, not an Expression" % (k, type(x).__name__)
            )
    return _k.scalar_affine(_k.esum(xs), 1.0 / len(xs), 0.0)


@op(
    formula="y = sum_i x_i",
    batch="per batch element: {1} x B",
    reference=lambda x: np.array([x.sum()]),
    cases=[Case([(3, 2)], batches=("none", "all")), Case([(5,)], batches=("none", "all"))],
    direct=_k.sum_elems,
)
def sum_elems(x):
    """Sum of all elements of each batch element."""


@op(
    formula="y = sum_i x_i^2",
    batch="per batch element: {1} x B",
    reference=lambda x: np.array([np.sum(x * x)]),
    cases=[Case([(3, 2)], batches=("none", "all"))],
    direct=_k.squared_norm,
)
def squared_norm(x):
    """Squared L2 norm of each batch element."""


@op(
    formula="y = sqrt(sum_i x_i^2)",
    batch="per batch element: {1} x B",
    reference=lambda x: np.array([np.sqrt(np.sum(x * x))]),
    cases=[Case([(3, 2)], batches=("none", "all")), Case([(4,)], batches=("none", "all"))],
    direct=_k.l2_norm,
)
def l2_norm(x):
    """L2 norm of each batch element."""


@op(
    formula="y = sum_i (x_i - z_i)^2",
    batch="batch 1 broadcasts",
    reference=lambda x, y: np.array([np.sum((x - y) ** 2)]),
    cases=[Case([(4,), (4,)]), Case([(2, 3), (2, 3)])],
    direct=_k.squared_distance,
)
def squared_distance(x, y):
    """Squared Euclidean distance: {1} per batch element."""


@op(
    formula="y = sum_b x_b",
    batch="sums over the batch: result batch 1",
    reference=lambda x: x.sum(axis=-1, keepdims=True),
    batch_reference=True,
    cases=[Case([(3, 2)], batches=("none", "all")), Case([(4,)], batches=("none", "all"))],
    direct=_k.sum_batches,
)
def sum_batches(x):
    """Sum over the batch dimension (e.g. of a batched loss before backward)."""
