"""Input and constant nodes: data the user gives the graph.

Data are column-major as in DyNet: a numpy array is flattened with
``order='F'``; ``batched=True`` makes the last numpy axis the batch.
"""

from __future__ import annotations

import numpy as np

from dyn._core import _expr


def _shape_of(dim):
    if isinstance(dim, float) and dim == int(dim):
        dim = int(dim)
    if isinstance(dim, (int, np.integer)):
        return (int(dim),)
    if isinstance(dim, (tuple, list)):
        return tuple(int(d) if isinstance(d, float) and d == int(d) else d for d in dim)
    raise TypeError("a dimension must be an int or a tuple of ints, got %r" % (dim,))


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
    a = np.asarray(arr, dtype=np.float64)
    if a.dtype == object:
        raise TypeError("inputTensor: ragged or non-numeric input")
    if batched:
        if a.ndim == 0:
            raise ValueError("inputTensor: a batched input needs at least one axis")
        shape, bd = (a.shape[:-1] or (1,)), a.shape[-1]
    else:
        shape, bd = (a.shape or (1,)), 1
    return _expr.make_input(a.ravel(order="F"), tuple(shape), bd, reusable_expr)


def inputVector(v, device=""):  # noqa: N802
    """A vector from a list or 1-D array; settable with ``.set(list)``."""
    a = np.asarray(v, dtype=np.float64).ravel()
    if a.size == 0:
        raise ValueError("inputVector: empty vector")
    return _expr.make_input(a, (a.size,), 1, True)


def vecInput(dim, device=""):  # noqa: N802
    """A zero vector of length ``dim``, filled later with ``.set(list)``."""
    (n,) = _shape_of(dim)
    return _expr.make_input(np.zeros(n), (n,), 1, True)


def scalarInput(s, device=""):  # noqa: N802
    """A scalar input (Dim {1}); ``.set(float)`` changes it."""
    return _expr.make_input([float(s)], (1,), 1, True)


def inputMatrix(v, d):  # noqa: N802
    raise DeprecationWarning("inputMatrix is deprecated: use inputTensor")


def matInput(d1, d2):  # noqa: N802
    raise DeprecationWarning("matInput is deprecated: use inputTensor")


def zeros(dim, batch_size=1):
    """Constant tensor of zeros."""
    return _expr.make_constant(_shape_of(dim), 0.0, batch_size)


zeroes = zeros


def ones(dim, batch_size=1):
    """Constant tensor of ones."""
    return _expr.make_constant(_shape_of(dim), 1.0, batch_size)


def constant(dim, val, batch_size=1):
    """Constant tensor filled with ``val``."""
    return _expr.make_constant(_shape_of(dim), float(val), batch_size)
