"""More input constructors: sparse tensors, one-hot vectors and raw
column-major data (DyNet's sparse_inputTensor, one_hot, inputTensorTranspose).

They are input nodes like those of dyn/ops/inputs.py (no kernel, not
registered operations): the dense data is built here once and handed to the
graph, column-major as in DyNet.
"""

from __future__ import annotations

import numpy as np

from dyn._core.core import expr as _expr
from dyn.ops import _check
from dyn.ops.inputs import _shape_of


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
