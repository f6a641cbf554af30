# cython: language_level=3
"""Argument checks and the batch rule shared by the kernel families."""
import operator

from numpy import bool_ as np_bool, integer as np_integer, ndarray

from dyn._core.core.graph cimport Graph, Node, arg, dim_str
from dyn._core.core.expr cimport Expression


cdef str arg_dims(Graph* g, Node* n):
    """The Dims of n's arguments, for error messages."""
    return ", ".join([dim_str(&arg(g, n, i).dim) for i in range(n.nargs)])


cdef int batch_rule(Graph* g, Node* n, str name) except -1:
    """The batch rule of most ops: each argument has batch 1 or B; returns B."""
    cdef int i, b = 1, x
    for i in range(n.nargs):
        x = arg(g, n, i).dim.bd
        if x != 1:
            if b != 1 and b != x:
                raise ValueError("%s: batch sizes differ (%s)" % (name, arg_dims(g, n)))
            b = x
    return b


cdef int expr_arg(object x, str name) except -1:
    # the core's own TypeError names the shared kernel, not the op the user called
    if not isinstance(x, Expression):
        raise TypeError("%s: expected an Expression (or Parameters), got %s" % (name, type(x).__name__))
    return 0


cdef int index_arg(object v, str name) except -1:
    """A non-negative index that fits the index pool (an int, not a float)."""
    if type(v) is int and 0 <= v <= 0x7fffffff:    # the common case, without operator.index
        return v
    if isinstance(v, (bool, np_bool)):       # True is an int to Python, never an index here
        raise TypeError("%s: indices must be integers, got %r" % (name, v))
    try:
        i = operator.index(v)
    except TypeError:
        raise TypeError("%s: indices must be integers, got %r" % (name, v)) from None
    if i < 0 or i > 0x7fffffff:
        raise IndexError("%s: index %d out of range" % (name, i))
    return i


cdef list indices_arg(object vs, str name, str what):
    """Any iterable of indices (DyNet's vector[unsigned]): list, range, numpy array."""
    try:
        it = iter(vs)
    except TypeError:
        raise TypeError("%s: %s must be a sequence of indices, got %s" % (name, what, type(vs).__name__)) from None
    v = [index_arg(i, name) for i in it]
    if not v:
        raise ValueError("%s: %s is empty" % (name, what))
    return v


cdef double number_arg(object v, str name, str what) except? -1.0:
    """A number (as DyNet's C++ float arguments): strings, bools and arrays
    (other than 0-d ones) are refused."""
    if type(v) is float:
        return v
    if isinstance(v, (str, bytes, bool, np_bool)) or (isinstance(v, ndarray) and v.ndim != 0):
        raise TypeError("%s: %s must be a number, got %r" % (name, what, v))
    try:
        return float(v)
    except (TypeError, ValueError):
        raise TypeError("%s: %s must be a number, got %r" % (name, what, v)) from None


cdef str show(object v):
    """A short description of a bad value for a message (as dyn/ops/_check.py's _show)."""
    if isinstance(v, ndarray):
        return "a numpy array of shape %r" % (v.shape,)
    r = repr(v)
    return "%s %s" % (type(v).__name__, r if len(r) <= 40 else r[:37] + "...")


cdef object int_arg(object v, str name, str what):
    """A Python int from an int-like (numpy integers too; not a bool or a float): range
    checks are the caller's, which knows what the integer is for."""
    if type(v) is int:
        return v
    if isinstance(v, (bool, np_bool, float)) or not hasattr(v, "__index__"):
        raise TypeError("%s: %s must be an integer, got %s" % (name, what, show(v)))
    try:
        return operator.index(v)
    except TypeError:       # e.g. a numpy array of more than one element
        raise TypeError("%s: %s must be an integer, got %s" % (name, what, show(v))) from None


cdef bint flag_arg(object v, str name, str what) except -1:
    """A bool (numpy bools and the ints 0 and 1 too, as DyNet's C++ bool): not any truth value."""
    if v is True or v is False:
        return v is True
    if isinstance(v, np_bool) or (isinstance(v, (int, np_integer)) and (v == 0 or v == 1)):
        return bool(v)
    raise TypeError("%s: %s must be True or False, got %s" % (name, what, show(v)))
