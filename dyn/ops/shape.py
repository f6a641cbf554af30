"""Shape, selection and batch manipulation (compiled in dyn/_core/ops/shape.pyx and dyn/_core/cpu/shape.pyx).

Indices are DyNet's unsigned ints: any iterable of Python or numpy ints; a
negative index raises IndexError (only Expression indexing, ``x[-1]``,
counts from the end as Python does).
"""

from __future__ import annotations

import numpy as np

from dyn._core.core import expr as _expr
from dyn._core.ops import shape as _k
from dyn.ops import _check
from dyn.ops._registry import Case, op


def _pad(a, nd):
    """A DyNet Dim with missing trailing dims as 1s."""
    return a.reshape(a.shape + (1,) * (nd - a.ndim)) if a.ndim < nd else a


def _concat_ref(*xs, d=0):
    nd = max(max(x.ndim for x in xs), d + 1)
    return np.concatenate([_pad(x, nd) for x in xs], axis=d)


def _take(x, i, dim):
    out = np.take(_pad(x, dim + 1), i, axis=dim)
    return out.reshape(1) if out.ndim == 0 else out


def _take_batch(x, indices, dim=0):
    """x with a trailing batch axis (size 1 broadcasts); one index per batch element."""
    cols = [_take(x[..., b if x.shape[-1] > 1 else 0], i, dim) for b, i in enumerate(indices)]
    return np.stack(cols, axis=-1)


_CAT = [
    Case([(3, 2), (4, 2)], {"d": 0}),
    Case([(3, 2), (3, 1), (3, 4)], {"d": 1}),
    Case([(2,), (3,), (1,)], {"d": 0}),
    Case([(3,), (3,)], {"d": 1}),
    Case([(2, 3, 2), (2, 3, 1)], {"d": 2}),
    Case([(3,), (3,)], {"d": 2}),
]


@op(
    formula="y = [x_1; x_2; ...] along dim d",
    batch="batch 1 broadcasts",
    reference=_concat_ref,
    list_input=True,
    cases=_CAT,
    direct=_k.concatenate,
)
def concatenate(xs, d=0):
    """Concatenate a list of expressions along dim ``d``.

    All other dims must be equal (missing trailing dims count as 1, so two
    {3} vectors along d=1 give a {3,2} matrix).

    Example:
        >>> h = dy.concatenate([fwd, bwd])       # {2n} from two {n}
    """


@op(
    formula="y = [x_1, x_2, ...] (columns)",
    batch="batch 1 broadcasts",
    reference=lambda *xs: _concat_ref(*xs, d=1),
    list_input=True,
    cases=[Case([(3,), (3,), (3,)]), Case([(3, 2), (3, 1)])],
    direct=_k.concatenate_cols,
)
def concatenate_cols(xs):
    """concatenate(xs, 1): vectors become the columns of a matrix.

    Example:
        >>> H = dy.concatenate_cols(states)      # {n, T}
    """


@op(
    formula="y_(batch) = [x_1 batch, x_2 batch, ...]",
    batch="result batch = sum of the batches",
    reference=lambda *xs: np.concatenate(xs, axis=-1),
    list_input=True,
    batch_reference=True,
    cases=[Case([(3, 2), (3, 2), (3, 2)]), Case([(4,), (4,)])],
    direct=_k.concatenate_to_batch,
)
def concatenate_to_batch(xs):
    """Concatenate along the batch: same per-example dims, batch = sum of batches.

    Example:
        >>> xb = dy.concatenate_to_batch([x1, x2, x3])   # {n} x 3
    """


def _transpose_ref(x, dims=(1, 0)):
    x = _pad(x, len(dims))
    if x.ndim > len(dims):  # dims past len(dims) are 1 (the op checks)
        x = x.reshape(x.shape[: len(dims)])
    return np.transpose(x, dims)


@op(
    formula="y_(i_p0, i_p1, ...) = x_(i_0, i_1, ...); default y = x^T",
    batch="per element",
    reference=_transpose_ref,
    cases=[
        Case([(3, 4)], batches=("none", "all")),
        Case([(5,)], batches=("none", "all")),
        Case([(2, 3, 4)], {"dims": [2, 0, 1]}, batches=("none", "all")),
        Case([(2, 3, 4)], {"dims": [1, 0, 2]}, batches=("none", "all")),
    ],
)
def transpose(x, dims=[1, 0]):  # noqa: B006 (DyNet's signature; never mutated)
    """Matrix transpose, or any permutation ``dims`` of up to 7 dims, per batch element.

    A vector {n} transposes to {1, n}. Dims past ``len(dims)`` must be 1.

    Example:
        >>> s = dy.transpose(h) * W * h
    """
    return _k.transpose(x, dims)


def _reshape_ref(x, d, batch_size=1):
    """Batched reference: x has a trailing batch axis."""
    if int(np.prod(d)) * batch_size == x.size:
        return x.reshape(tuple(d) + (batch_size,), order="F")
    return x.reshape(tuple(d) + (x.shape[-1],), order="F")


@op(
    formula="y = x with dims d (column-major order kept)",
    batch="prod(d)*batch_size == total: result batch batch_size; else batch kept",
    reference=_reshape_ref,
    batch_reference=True,
    cases=[
        Case([(3, 4)], {"d": (2, 6)}, batches=("none", "all")),
        Case([(6,)], {"d": (2, 3)}, batches=("none", "all")),
        Case([(2, 3)], {"d": (6,)}, batches=("none", "all")),
        Case([(2, 3)], lambda b: {"d": (3,), "batch_size": 2 * b}, batches=("none", "all")),
        Case([(2,)], lambda b: {"d": (2 * b,)}, batches=("none", "all")),
    ],
    direct=_k.reshape,
)
def reshape(x, d, batch_size=1):
    """Reshape to the tuple ``d`` (data order unchanged; a copy).

    If prod(d) * batch_size equals x's total size the result is exactly
    (d, batch_size), which moves data into or out of the batch; otherwise
    batch_size must be 1 and d must hold one batch element (x's batch kept).

    Example:
        >>> m = dy.reshape(v, (3, 4))
    """


@op(
    formula="y = x[..., index, ...] (dim `dim` removed)",
    batch="same index for every batch element",
    reference=lambda x, index=0, dim=0: _take(x, index, dim),
    cases=[
        Case([(3, 4)], {"index": 2}, batches=("none", "all")),
        Case([(3, 4)], {"index": 1, "dim": 1}, batches=("none", "all")),
        Case([(5,)], {"index": 3}, batches=("none", "all")),
        Case([(2, 3, 4)], {"index": 3, "dim": 2}, batches=("none", "all")),
    ],
    direct=_k.pick,
)
def pick(e, index=0, dim=0):
    """Slice ``index`` along ``dim``, removing that dim (a row of a matrix, an
    element of a vector). The result has ``set_index(i)``.

    Example:
        >>> p = dy.pick(dy.softmax(s), gold)
    """


@op(
    formula="y_b = x_b[..., indices[b], ...] (dim `dim` removed)",
    batch="result batch = len(indices); a batch-1 e broadcasts",
    reference=_take_batch,
    batch_reference=True,
    cases=[
        Case([(3, 4)], lambda b: {"indices": [(2 * i + 1) % 3 for i in range(b)]}, batches=("none", "all")),
        # fixed 3 indices: with a batch-1 e ("none") this is the broadcast case
        Case([(3, 4)], {"indices": [2, 0, 2]}, batches=("none", "all")),
        Case([(3, 4)], lambda b: {"indices": [i % 4 for i in range(b)], "dim": 1}, batches=("none", "all")),
        Case([(5,)], {"indices": [4, 1, 4]}, batches=("none", "all")),
    ],
    direct=_k.pick_batch,
)
def pick_batch(e, indices, dim=0):
    """One slice per batch element (``indices[b]`` for element b); the result
    batch is len(indices). The result has ``set_index(indices)``.

    Example:
        >>> p = dy.pick_batch(dy.log_softmax(s), gold_labels)
    """


@op(
    formula="y = x_(batch v)",
    batch="result batch 1",
    reference=lambda x, v: x[..., v : v + 1],
    batch_reference=True,
    cases=[
        Case([(3, 2)], lambda b: {"v": b - 1}, batches=("none", "all")),
        Case([(4,)], lambda b: {"v": b // 2}, batches=("none", "all")),
    ],
)
def pick_batch_elem(x, v):
    """Batch element ``v`` of x as a batch-1 expression."""
    return _k.batch_select(x, [v], "pick_batch_elem")


@op(
    formula="y_(batch k) = x_(batch vs[k])",
    batch="result batch = len(vs)",
    reference=lambda x, vs: x[..., list(vs)],
    batch_reference=True,
    cases=[
        Case([(3, 2)], lambda b: {"vs": [b - 1, 0, b - 1]}, batches=("none", "all")),
        Case([(4,)], lambda b: {"vs": list(range(b))[::-1]}, batches=("none", "all")),
    ],
)
def pick_batch_elems(x, vs):
    """Batch elements ``vs`` (in order; repeats allowed) as a batch of len(vs)."""
    return _k.batch_select(x, vs, "pick_batch_elems")


@op(
    formula="y = x[s:e] along dim d",
    batch="per element",
    reference=lambda x, s, e, d=0: np.take(_pad(x, d + 1), range(s, e), axis=d),
    cases=[
        Case([(5, 3)], {"s": 1, "e": 4}, batches=("none", "all")),
        Case([(3, 4)], {"s": 0, "e": 2, "d": 1}, batches=("none", "all")),
        Case([(6,)], {"s": 5, "e": 6}, batches=("none", "all")),
    ],
)
def pick_range(x, s, e, d=0):
    """Elements [s, e) along dim ``d`` (0 <= s < e <= size, else an error).

    Example:
        >>> first = dy.pick_range(h, 0, n)
    """
    return _pick_range(x, s, e, d, "pick_range")


def _pick_range(x, s, e, d, name):
    if type(s) is int and type(e) is int and type(d) is int and 0 <= s < e <= _check.MAX_INDEX \
            and 0 <= d < _check.MAXD:
        return _k.pick_range(x, s, e, d, name)  # the common case: checked and built in one compiled call
    _check.expr(x, name)
    d = _check.axis(d, name, "d")
    s = _check.index(s, name, "start")
    e = _check.index(e, name, "end")
    dims = x.dim()[0]
    size = dims[d] if d < len(dims) else 1
    if s >= e:
        raise ValueError(f"{name}: start {s} must be below end {e}")
    if e > size:
        raise IndexError(
            f"{name}: end {e} is out of range for dim {d} of size {size} (expression dim {x.dim()})"
        )
    return _k.select(x, d, range(s, e), "pick_range")


@op(
    formula="y = x[s:e] along dim 0",
    batch="per element",
    reference=lambda x, s, e: x[s:e],
    cases=[Case([(5, 2)], {"s": 2, "e": 5}, batches=("none", "all"))],
)
def pickrange(x, s, e):
    """Deprecated DyNet alias of pick_range(x, s, e, 0)."""
    return _pick_range(x, s, e, 0, "pickrange")


def _strided_ref(x, strides, range_from, range_to):
    """Batched reference: entry nd of the lists addresses the trailing batch axis."""
    sl = [slice(None)] * x.ndim
    for k in range(x.ndim):
        size = x.shape[k]
        sl[k] = slice(
            range_from[k] if k < len(range_from) else 0,
            range_to[k] if k < len(range_to) else size,
            strides[k] if k < len(strides) else 1,
        )
    return x[tuple(sl)]


@op(
    formula="y = x[from_0:to_0:stride_0, from_1:to_1:stride_1, ...]",
    batch="per element; an entry past the last dim selects batch elements",
    reference=_strided_ref,
    batch_reference=True,
    cases=[
        Case(
            [(6, 4)], {"strides": [2, 1], "range_from": [1, 0], "range_to": [6, 3]}, batches=("none", "all")
        ),
        Case([(5,)], {"strides": [2], "range_from": [0], "range_to": [5]}, batches=("none", "all")),
        Case(
            [(3,)],
            lambda b: {"strides": [1, 2], "range_from": [1, 0], "range_to": [3, b]},
            batches=("none", "all"),
        ),
        Case([(4, 3)], {"strides": [3], "range_from": [], "range_to": []}, batches=("none", "all")),
    ],
)
def strided_select(x, strides, range_from, range_to):
    """numpy-like x[from:to:stride] per dim.

    The lists may be shorter than x's dims (missing entries: stride 1, from 0,
    to the size); an entry at index nd (one past the last dim) slices the
    batch. Requires stride > 0 and 0 <= from < to <= size.

    Example:
        >>> evens = dy.strided_select(v, [2], [0], [n])
    """
    _check.expr(x, "strided_select")
    dims, bd = x.dim()
    sizes = list(dims) + [bd]
    lists = [
        _check.int_list(v, "strided_select", what)
        for v, what in ((strides, "strides"), (range_from, "range_from"), (range_to, "range_to"))
    ]
    n = max(len(v) for v in lists)
    if n > len(sizes):
        raise ValueError(
            f"strided_select: {n} entries for an expression of dim {x.dim()} (at most {len(sizes)}: its "
            "dims and the batch)"
        )
    sel = []
    for k in range(n):
        step = lists[0][k] if k < len(lists[0]) else 1
        lo = lists[1][k] if k < len(lists[1]) else 0
        hi = lists[2][k] if k < len(lists[2]) else sizes[k]
        if step <= 0 or not 0 <= lo < hi <= sizes[k]:
            raise ValueError(
                f"strided_select: dim {k} of size {sizes[k]}: need stride > 0 and 0 <= from < to "
                f"<= size, got stride {step}, from {lo}, to {hi}"
            )
        sel.append(range(lo, hi, step))
    return _slices(x, sel, "strided_select")


def _slices(x, sel, name):
    """Select range sel[k] along dim k (k == nd: the batch); full ranges skip
    a node, but at least one node is made (the result is never x itself)."""
    dims, bd = x.dim()
    sizes = list(dims) + [bd]
    out = x
    for k, r in enumerate(sel):
        if r == range(sizes[k]):
            continue
        out = _k.batch_select(out, r, name) if k == len(dims) else _k.select(out, k, r, name)
    if out is x:
        out = _k.select(x, 0, range(sizes[0]), name)
    return out


@op(
    formula="y = x[rs, :] (rows in order, repeats allowed)",
    batch="per element",
    reference=lambda x, rs: _pad(x, 1)[list(rs)],
    cases=[
        Case([(4, 3)], {"rs": [3, 0, 3]}, batches=("none", "all")),
        Case([(5,)], {"rs": [1, 4]}, batches=("none", "all")),
    ],
)
def select_rows(x, rs):
    """Rows ``rs`` of x, in order (a repeated row's gradient accumulates).

    Example:
        >>> sub = dy.select_rows(E, [2, 0, 5])
    """
    return _k.select(x, 0, rs, "select_rows")


@op(
    formula="y = x[:, cs] (columns in order, repeats allowed)",
    batch="per element",
    reference=lambda x, cs: _pad(x, 2)[:, list(cs)],
    cases=[
        Case([(3, 4)], {"cs": [2, 0, 2]}, batches=("none", "all")),
        Case([(2, 5)], {"cs": [4]}, batches=("none", "all")),
    ],
)
def select_cols(x, cs):
    """Columns ``cs`` of a matrix x, in order (repeats allowed).

    Example:
        >>> sub = dy.select_cols(H, [0, t])
    """
    dims = _check.expr(x, "select_cols").dim()[0]
    if len(dims) > 2:
        raise ValueError(f"select_cols: x must be a matrix, got dim {x.dim()}")
    return _k.select(x, 1, cs, "select_cols")


@op(
    formula="y_i = x_i ** e (e a single-element expression)",
    batch="batch 1 broadcasts",
    reference=lambda x, y: np.power(x, y[0]),
    cases=[Case([(3, 2), (1,)], domain="positive"), Case([(4,), (1,)], domain=("positive", "real"))],
    direct=_k.pow,
)
def pow(x, y):
    """Elementwise power x ** e, where ``y`` is a single-element expression
    (per batch element). ``x ** 2.5`` uses a faster one-argument node.

    Example:
        >>> z = dy.pow(x, dy.scalarInput(3.0))
    """


def _pow(x, y):
    """Expression ** number (one node, exponent kept in the node) or
    Expression ** single-element Expression (pow)."""
    if isinstance(y, _expr.Expression):
        return _k.pow(x, y)
    if isinstance(y, (int, float, np.integer, np.floating)) and not isinstance(y, bool):
        return _k.pow_const(x, float(y))
    return NotImplemented


def _getitem(x, i):
    """Expression indexing: x[i] (pick with Python negative indices), x[a:b:s]
    (rows), x[s0, s1, ...] (slices per dim; an entry one past the last dim
    slices the batch)."""
    if isinstance(i, slice):
        i = (i,)
    if isinstance(i, tuple):
        dims, bd = x.dim()
        sizes = list(dims) + [bd]
        if len(i) > len(sizes):
            raise IndexError(f"Expression indexing: {len(i)} indices for an expression of dim {x.dim()}")
        sel = []
        for k, s in enumerate(i):
            if not isinstance(s, slice):
                raise TypeError(
                    f"Expression indexing: a tuple index must hold only slices, got {type(s).__name__} "
                    "(use dy.pick for an integer index)"
                )
            r = range(*s.indices(sizes[k]))
            if r.step <= 0 or len(r) == 0:
                raise ValueError(
                    f"Expression indexing: slice {s!r} of dim {k} (size {sizes[k]}) is empty or has a "
                    "non-positive step"
                )
            sel.append(r)
        return _slices(x, sel, "Expression indexing")
    if isinstance(i, (bool, float)) or not hasattr(i, "__index__"):
        raise TypeError(
            f"Expression indices must be integers, slices or tuples of slices, not {type(i).__name__}"
        )
    i = int(i)
    size = x.dim()[0][0]
    if not -size <= i < size:
        raise IndexError(f"Expression index {i} is out of range for dim 0 of size {size}")
    return _k.pick(x, i + size if i < 0 else i, 0)
