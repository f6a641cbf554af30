"""Argument checks for the Python side of operations.

Every check raises at expression creation with a message that names the op,
the argument and the offending value: TypeError for a wrong type (a bool or a
float where an integer is expected, None, a string, an array), ValueError for
a value out of its domain, IndexError for an index out of range. They are
cheap (isinstance and comparisons) so that op wrappers can call them on every
call. The compiled kernels check their own arguments the same way
(dyn/_core/ops/util.pyx, dyn/_core/ops/shape.pyx).
"""

from __future__ import annotations

import numbers

import numpy as np

from dyn._core.core.expr import Expression
from dyn._core.ops.util import flag_arg, int_arg
from dyn._core.ops.util import show as _show

MAX_INDEX = 0x7FFFFFFF  # indices and sizes are C ints in the core
MAXD = 7  # dims per tensor, as DyNet


def expr(x, name, what="x"):
    """x must be an Expression (Parameters are Expressions)."""
    if not isinstance(x, Expression):
        raise TypeError("%s: expected an Expression (or Parameters) for %s, got %s" % (name, what, _show(x)))
    return x


# one implementation for the compiled op builders and the Python wrappers
integer = int_arg  # integer(v, name, what): a Python int from an int-like, not a bool or a float
flag = flag_arg  # flag(v, name, what): a bool (numpy bools, 0 and 1 too), not any truth value


def index(v, name, what="index"):
    """A non-negative integer index that fits the core's C ints (IndexError otherwise)."""
    i = integer(v, name, what)
    if i < 0:
        raise IndexError("%s: %s %d is negative (indices are unsigned)" % (name, what, i))
    if i > MAX_INDEX:
        raise IndexError("%s: %s %d is out of range" % (name, what, i))
    return i


def count(v, name, what, low=1):
    """An integer >= low that fits a C int (ValueError otherwise)."""
    i = integer(v, name, what)
    if i < low:
        raise ValueError(
            "%s: %s must be %s, got %d" % (name, what, "positive" if low == 1 else ">= %d" % low, i)
        )
    if i > MAX_INDEX:
        raise ValueError("%s: %s %d is too large (at most %d)" % (name, what, i, MAX_INDEX))
    return i


def axis(v, name, what="d"):
    """A dimension number 0 <= d < 7 (ValueError otherwise)."""
    if type(v) is int and 0 <= v < MAXD:
        return v
    d = integer(v, name, what)
    if not 0 <= d < MAXD:
        raise ValueError("%s: %s %d is out of range (0 <= %s < %d)" % (name, what, d, what, MAXD))
    return d


def number(v, name, what):
    """A real number as a float: refuses None, strings, bools, complex numbers and arrays."""
    if type(v) is float:
        return v
    if isinstance(v, numbers.Real) and not isinstance(v, bool):  # ints, numpy scalars, Fractions
        return float(v)
    if isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "iuf":
        return float(v)
    raise TypeError("%s: %s must be a number, got %s" % (name, what, _show(v)))


def int_list(v, name, what):
    """A list of integers from a list, tuple, range or 1-D integer array."""
    if isinstance(v, (str, bytes, dict, set, frozenset)) or not hasattr(v, "__iter__"):
        raise TypeError("%s: %s must be a list of integers, got %s" % (name, what, _show(v)))
    return [integer(i, name, "each entry of " + what) for i in v]


_REAL_KINDS = frozenset("biuf")  # bool, signed, unsigned, float


def real_array(data, name, what="values"):
    """data as a float64 numpy array, refusing what is not real numbers.

    Complex numbers (whose imaginary part would be dropped), None (which would
    become NaN), strings, and ragged or non-numeric objects raise TypeError
    naming the op and the dtype.
    """
    if isinstance(data, np.ndarray):
        a = data
    else:
        if data is None or isinstance(data, (str, bytes)):
            raise TypeError("%s: %s must be real numbers, got %s" % (name, what, _show(data)))
        try:
            a = np.asarray(data)
        except ValueError:  # ragged nested lists
            raise TypeError(
                "%s: %s must be a rectangular array of real numbers, got a ragged %s"
                % (name, what, type(data).__name__)
            ) from None
    if a.dtype.kind not in _REAL_KINDS:
        if a.dtype.kind == "O":
            bad = [x for x in a.flat if not _is_real(x)][:1]
            if not bad:
                return a.astype(np.float64)  # numbers held as objects
            raise TypeError(
                "%s: %s must be real numbers, got an array of dtype object holding %s"
                % (name, what, _show(bad[0]))
            )
        raise TypeError("%s: %s must be real numbers, got an array of dtype %s" % (name, what, a.dtype))
    return a.astype(np.float64, copy=False)


def _is_real(x):
    return isinstance(x, (int, float, np.integer, np.floating, np.bool_))
