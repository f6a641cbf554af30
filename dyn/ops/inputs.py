"""Input and constant nodes: data the user gives the graph, dense
(inputTensor, inputVector, ...), constant (zeros, ones, constant), sparse,
one-hot or raw column-major (DyNet's sparse_inputTensor, one_hot,
inputTensorTranspose).

Data are column-major as in DyNet: a numpy array is flattened with
``order='F'``; ``batched=True`` makes the last numpy axis the batch. These
are input nodes (no kernel, not registered operations): the dense data is
built here once and handed to the graph.
"""

from __future__ import annotations

import numpy as np

from dyn._core.core import expr as _expr
from dyn.ops import _check


def _shape_of(dim, name="dim"):
    """A tuple of positive ints from an int or a tuple/list of them.

    A float with an integral value (3.0) counts as that int, as DyNet's
    dims do; other floats, bools, None, strings and arrays raise TypeError
    naming the op (``name``)."""
    if type(dim) is int and 0 < dim <= _check.MAX_INDEX:  # the common case, before the isinstance checks
        return (dim,)
    if isinstance(dim, (tuple, list)):
        return tuple(_one_dim(d, dim, name) for d in dim)
    if isinstance(dim, (int, np.integer, float)) and not isinstance(dim, (bool, np.bool_)):
        return (_one_dim(dim, dim, name),)
    raise TypeError("%s: a dimension must be an int or a tuple of ints, got %s" % (name, _check._show(dim)))


def _one_dim(d, dim, name):
    if type(d) is int:
        v = d
    elif isinstance(d, float) and d.is_integer():
        v = int(d)
    elif isinstance(d, (bool, np.bool_, float)) or not hasattr(d, "__index__"):
        raise TypeError("%s: dimensions must be integers, got %r" % (name, dim))
    else:
        v = _check.integer(d, name, "a dimension")
    if v <= 0:
        raise ValueError("%s: dimensions must be positive, got %r" % (name, dim))
    if v > _check.MAX_INDEX:
        raise ValueError("%s: dimension %d of %r is too large" % (name, v, dim))
    return v


def _batch(batch_size, name):
    if type(batch_size) is int and batch_size > 0:
        return batch_size
    return _check.count(batch_size, name, "batch_size")


def inputTensor(arr, batched=False, device="", reusable_expr=False):  # noqa: N802 (DyNet name)
    """A tensor from a numpy array or nested list.

    Args:
        arr: array-like; a Python list of arrays is stacked on a new last axis
            and treated as batched.
        batched: the last axis is the batch dimension.
        reusable_expr: allow ``.set(values)`` later (static-graph reuse).

    Example:
        >>> x = dy.inputTensor(np.random.rand(4, 8), batched=True)  # {4} x 8
    """
    if isinstance(arr, list) and arr and isinstance(arr[0], np.ndarray):
        arr = np.stack(arr, axis=-1)
        batched = True
    if not isinstance(arr, (np.ndarray, list, tuple)) and not np.isscalar(arr):
        raise TypeError("inputTensor: expected a numpy array or a list, got %s" % type(arr).__name__)
    a = _check.real_array(arr, "inputTensor", "arr")
    if batched:
        if a.ndim == 0:
            raise ValueError("inputTensor: a batched input needs at least one axis")
        shape, bd = (a.shape[:-1] or (1,)), a.shape[-1]
    else:
        shape, bd = (a.shape or (1,)), 1
    return _expr.make_input(a.ravel(order="F"), tuple(shape), bd, reusable_expr)


def inputVector(v, device=""):  # noqa: N802
    """A vector from a list or 1-D array; settable with ``.set(list)``."""
    a = _check.real_array(v, "inputVector", "v").ravel()
    if a.size == 0:
        raise ValueError("inputVector: empty vector")
    return _expr.make_input(a, (a.size,), 1, True)


def vecInput(dim, device=""):  # noqa: N802
    """A zero vector of length ``dim``, filled later with ``.set(list)``."""
    (n,) = _shape_of(dim, "vecInput")
    return _expr.make_input(np.zeros(n), (n,), 1, True)


def scalarInput(s, device=""):  # noqa: N802
    """A scalar input (Dim {1}); ``.set(float)`` changes it."""
    return _expr.make_input([_check.number(s, "scalarInput", "s")], (1,), 1, True)


def inputMatrix(v, d):  # noqa: N802
    raise DeprecationWarning("inputMatrix is deprecated: use inputTensor")


def matInput(d1, d2):  # noqa: N802
    raise DeprecationWarning("matInput is deprecated: use inputTensor")


def zeros(dim, batch_size=1):
    """Constant tensor of zeros."""
    return _expr.make_constant(_shape_of(dim, "zeros"), 0.0, _batch(batch_size, "zeros"))


zeroes = zeros


def ones(dim, batch_size=1):
    """Constant tensor of ones."""
    return _expr.make_constant(_shape_of(dim, "ones"), 1.0, _batch(batch_size, "ones"))


def constant(dim, val, batch_size=1):
    """Constant tensor filled with ``val``."""
    val = _check.number(val, "constant", "val")
    return _expr.make_constant(_shape_of(dim, "constant"), val, _batch(batch_size, "constant"))


def _index_array(v, name):
    a = np.asarray(v)
    if a.dtype == object or (a.size and not np.issubdtype(a.dtype, np.integer)):
        raise TypeError("%s: indices must be integers, got %r" % (name, v))
    return a.astype(np.int64).ravel()


def _input(name, data, dim, bd):
    """make_input, naming the op in its shape errors."""
    try:
        return _expr.make_input(data, tuple(dim), int(bd), False)
    except (TypeError, ValueError) as e:
        raise type(e)("%s: %s" % (name, e)) from None


def sparse_inputTensor(idxs, values, shape, batched=False, defval=0, device=""):  # noqa: N802 (DyNet name)
    """A tensor that is ``defval`` everywhere except at the given coordinates.

    Args:
        idxs: a tuple/list with one integer array per dimension of ``shape``
            (the batch dimension included, last, when batched): entry k is
            at (idxs[0][k], idxs[1][k], ...). A repeated coordinate keeps
            its last value.
        values: 1-D list/array, one value per coordinate.
        shape: the full shape (batch last when batched).
        batched: the last dimension of ``shape`` is the batch.
        defval: the value of every other element.

    Example:
        >>> x = dy.sparse_inputTensor(([0, 2], [1, 1]), [5.0, 7.0], (3, 2))
        >>> x.npvalue()    # [[0, 5], [0, 0], [0, 7]]
    """
    name = "sparse_inputTensor"
    vals = (
        _check.real_array(values, name, "values") if isinstance(values, (list, tuple, np.ndarray)) else values
    )
    if not isinstance(vals, np.ndarray):
        raise TypeError(
            "%s: values must be a list or a 1-D numpy array, got %s" % (name, type(values).__name__)
        )
    if vals.ndim != 1:
        raise TypeError("%s: values should be a 1-D array, got shape %r" % (name, vals.shape))
    shape = _shape_of(shape, name)
    if not isinstance(idxs, (list, tuple)):
        raise TypeError("%s: idxs must be a tuple/list of index arrays, got %s" % (name, type(idxs).__name__))
    if len(idxs) != len(shape):
        raise ValueError(
            "%s: %d index arrays for a shape of %d dimensions %r" % (name, len(idxs), len(shape), shape)
        )
    coords = [_index_array(i, name) for i in idxs]
    for k, (c, n) in enumerate(zip(coords, shape)):
        if len(c) != len(vals):
            raise ValueError("%s: index array %d has %d entries for %d values" % (name, k, len(c), len(vals)))
        bad = (c < 0) | (c >= n)
        if bad.any():
            raise IndexError(
                "%s: index %d is out of range for dimension %d of size %d (shape %r)"
                % (name, int(c[bad][0]), k, n, shape)
            )
    data = np.full(int(np.prod(shape)), _check.number(defval, name, "defval"))
    if len(vals):
        data[np.ravel_multi_index(tuple(coords), shape, order="F")] = vals
    if batched:
        dim, bd = (shape[:-1] or (1,)), shape[-1]
    else:
        dim, bd = shape, 1
    # not settable, as DyNet's sparse input: set() raises ValueError
    return _input(name, data, dim, bd)


def one_hot(d, idx, device=""):
    """A vector of size ``d`` that is 1 at ``idx`` and 0 elsewhere; with a
    list of indices, a batch of them (batch element b is hot at idx[b]).

    Args:
        d: the vector size.
        idx: an index, or a list of indices (one per batch element).

    Example:
        >>> x = dy.one_hot(5, 2)            # {5}: [0, 0, 1, 0, 0]
        >>> xs = dy.one_hot(5, [0, 4, 1])   # {5} x 3
    """
    if isinstance(d, float) and d == int(d):
        d = int(d)
    if isinstance(d, bool) or not hasattr(d, "__index__"):
        raise TypeError("one_hot: d must be an integer, got %r" % (d,))
    if d <= 0:
        raise ValueError("one_hot: d must be positive, got %d" % d)
    if hasattr(idx, "__index__") and not isinstance(idx, bool):
        rows = [idx]
    elif isinstance(idx, (str, bytes)) or not hasattr(idx, "__iter__"):
        raise TypeError("one_hot: idx must be an integer or a list of integers, got %r" % (idx,))
    else:
        rows = list(idx)
        if not rows:
            raise ValueError("one_hot: empty index list")
    for i in rows:
        if isinstance(i, (bool, float)) or not hasattr(i, "__index__"):
            raise TypeError("one_hot: indices must be integers, got %r" % (i,))
        if not 0 <= i < d:
            raise IndexError("one_hot: index %d is out of range for a vector of size %d" % (i, d))
    data = np.zeros((int(d), len(rows)))
    data[np.asarray(rows, dtype=np.int64), np.arange(len(rows))] = 1.0
    return _input("one_hot", data.ravel(order="F"), (int(d),), len(rows))


def inputTensorTranspose(val, dim=None, batch_size=1, device=""):  # noqa: N802 (DyNet name)
    """A tensor from flat column-major data and an explicit Dim: the values
    are taken in the order given (batch element after batch element).

    DyNet makes this a class used like a function; calling it is the same.

    Args:
        val: 1-D list/array of the values, column-major, batch last.
        dim: int or tuple; default (len(val),).
        batch_size: number of batch elements.

    Example:
        >>> x = dy.inputTensorTranspose([1, 2, 3, 4, 5, 6], (2, 3))   # [[1, 3, 5], [2, 4, 6]]
    """
    name = "inputTensorTranspose"
    a = _check.real_array(val, name, "val")
    if a.ndim != 1:
        raise TypeError(
            "%s: val must be a 1-D list or array (a 1-D view of column-major data), got shape %r"
            % (name, a.shape)
        )
    shape = (len(a),) if dim is None else _shape_of(dim, name)
    if isinstance(batch_size, bool) or not hasattr(batch_size, "__index__"):
        raise TypeError("%s: batch_size must be an integer, got %r" % (name, batch_size))
    if batch_size <= 0:
        raise ValueError("%s: batch_size must be positive, got %d" % (name, batch_size))
    total = int(np.prod(shape)) * int(batch_size)
    if total != len(a):
        raise ValueError(
            "%s: dimensions/batch size multiply to %d, which does not match the size of the "
            "given array %d" % (name, total, len(a))
        )
    return _input(name, a.astype(np.float64), shape, batch_size)
