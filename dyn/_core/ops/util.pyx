# cython: language_level=3
"""Argument checks and the batch rule shared by the kernel families."""
import operator

from numpy import bool_ as np_bool, integer as np_integer, ndarray

from dyn._core.core.graph import set_labels
from dyn._core.core.graph cimport Graph, Node, arg, declare_op, dim_eq_nobatch, dim_str, idx, shape_fn
from dyn._core.core.expr cimport Expression, finish, node2


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


cpdef str show(object v):
    """A short description of a bad value for a message (dyn/ops/_check.py's too)."""
    if isinstance(v, ndarray):
        return "a numpy array of shape %r" % (v.shape,)
    r = repr(v)
    return "%s %s" % (type(v).__name__, r if len(r) <= 40 else r[:37] + "...")


cpdef object int_arg(object v, str name, str what):
    """A Python int from an int-like (numpy integers too; not a bool or a float): range
    checks are the caller's, which knows what the integer is for (dyn/ops/_check.py's integer)."""
    if type(v) is int:
        return v
    if isinstance(v, (bool, np_bool, float)) or not hasattr(v, "__index__"):
        raise TypeError("%s: %s must be an integer, got %s" % (name, what, show(v)))
    try:
        return operator.index(v)
    except TypeError:       # e.g. a numpy array of more than one element
        raise TypeError("%s: %s must be an integer, got %s" % (name, what, show(v))) from None


cpdef bint flag_arg(object v, str name, str what) except -1:
    """A bool (numpy bools and the ints 0 and 1 too, as DyNet's C++ bool): not any truth value
    (dyn/ops/_check.py's flag)."""
    if v is True or v is False:
        return v is True
    if isinstance(v, np_bool) or (isinstance(v, (int, np_integer)) and (v == 0 or v == 1)):
        return bool(v)
    raise TypeError("%s: %s must be True or False, got %s" % (name, what, show(v)))


cdef int same_dims_rule(Graph* g, Node* n, str name) except -1:
    """The shape rule of an op over a list of expressions of the same dims (esum, logsumexp):
    the output has those dims and the batch of the batch rule."""
    cdef int i
    cdef Node* a = arg(g, n, 0)
    for i in range(1, n.nargs):
        if not dim_eq_nobatch(&a.dim, &arg(g, n, i).dim):
            raise ValueError("%s: all expressions must have the same dimensions, got %s"
                             % (name, arg_dims(g, n)))
    return out_like(g, n, a, name)


cdef int vector_rule(Graph* g, Node* n, str name) except -1:
    """The shape rule of an op on one vector x (sparsemax, argmax): the output is x's Dim."""
    cdef Node* x = arg(g, n, 0)
    if not looks_like_vector(&x.dim):
        raise ValueError("%s: x must be a vector (every dimension after the first 1), got %s"
                         % (name, dim_str(&x.dim)))
    n.dim = x.dim
    return 0


cdef int picked_vector_check(Graph* g, Node* n, str single, str batch) except -1:
    """The checks of an op that picks entries of a vector x by index (hinge,
    pickneglogsoftmax): ia[0] says the batch form (`batch`, one index per batch element)
    from the single form (`single`, one index for an unbatched x)."""
    cdef Node* x = arg(g, n, 0)
    cdef str name = batch if n.ia[0] else single
    cdef int k, m = x.dim.d[0]
    cdef int* v = idx(g, n)
    if not looks_like_vector(&x.dim):
        raise ValueError("%s: x must be a vector (every dimension after the first 1), got %s"
                         % (name, dim_str(&x.dim)))
    if not n.ia[0] and x.dim.bd != 1:
        raise ValueError("%s: x is batched (%s) but one index was given; use "
                         "%s(x, [one index per batch element])" % (single, dim_str(&x.dim), batch))
    if x.dim.bd != 1 and n.nidx != x.dim.bd:
        raise ValueError("%s: %d indices for x of batch size %d (%s); give one index per "
                         "batch element" % (batch, n.nidx, x.dim.bd, dim_str(&x.dim)))
    for k in range(n.nidx):
        if v[k] >= m:
            raise IndexError("%s: index %d out of range for x of dim %s" % (name, v[k], dim_str(&x.dim)))
    return 0


cdef Expression binary(int op, object x, object y, str name):
    """The node of a two-argument op, both arguments checked as Expressions for `name`."""
    expr_arg(x, name)
    expr_arg(y, name)
    return finish(node2(op, x, y))


cdef Expression binary_kind(int op, object x, object y, int kind, str name):
    """binary, for an op whose variant (ia[0]) is `kind`."""
    expr_arg(x, name)
    expr_arg(y, name)
    cdef int nid = node2(op, x, y)
    g_node(nid).ia[0] = kind
    return finish(nid)


cdef int declare_labelled(str name, shape_fn shape, int k, tuple labels, int aux=0) except -1:
    """declare_op for a kernel that computes several public operations, told apart by ia[k]
    (labels, for graph dumps): returns the op code."""
    cdef int op = declare_op(name, shape, aux)
    set_labels(name, k, labels)
    return op
