"""Input and constant nodes: data the user gives the graph.

Data are column-major as in DyNet: a numpy array is flattened with
``order='F'``; ``batched=True`` makes the last numpy axis the batch.
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
