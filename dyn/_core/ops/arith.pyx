# cython: language_level=3
"""Arithmetic: elementwise (+, -, cmult, cdiv with broadcasting), scalar
affine (x*a + c), matrix product, affine_transform, dot products, sums and
norms. Each op: shape rule, node constructors, labels and automatic batching
(the CPU kernels: dyn/_core/cpu/arith.pyx).
"""
from dyn._core.core.graph cimport set_autobatch, AB_ON, AB_BCAST, AB_SHARE_ODD
from dyn._core.core.graph cimport (
    Graph, Node, Dim, declare_op, dim_cols, dim_str, arg, dim_eq_nobatch)
from dyn._core.core.expr cimport (
    node1, node2, noden, finish, Expression, set_binop, binop_fn, BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV)
from dyn._core.cpu.bcast cimport _ext
from dyn._core.ops.util cimport (
    arg_dims, batch_rule, declare_labelled, expr_arg, g_node, number_arg, same_dims_rule)

# ---------------------------------------------------------------- elementwise binary

cdef int _shape_cw(Graph* g, Node* n) except -1:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    cdef int k, ea, eb, nd = a.dim.nd if a.dim.nd > b.dim.nd else b.dim.nd
    cdef str name = ("add", "subtract", "cmult", "cdiv")[n.ia[0]]
    n.dim.nd = nd
    for k in range(7):
        ea = _ext(&a.dim, k)
        eb = _ext(&b.dim, k)
        if ea != eb and (eb != 1 if n.ia[0] == DIV else (ea != 1 and eb != 1)):
            raise ValueError("%s: dimensions %s and %s do not broadcast (each dim equal%s)"
                             % (name, dim_str(&a.dim), dim_str(&b.dim),
                                ", or 1 in the right operand" if n.ia[0] == DIV else " or 1"))
        if k < nd:
            n.dim.d[k] = ea if ea > eb else eb
    if n.ia[0] == DIV and b.dim.bd != 1 and b.dim.bd != a.dim.bd:
        raise ValueError("cdiv: batch sizes %s and %s (the right operand's batch must be 1 or equal)"
                         % (dim_str(&a.dim), dim_str(&b.dim)))
    n.dim.bd = batch_rule(g, n, name)
    return 0


OP_CW = declare_labelled("cwise", _shape_cw, 0, ("+", "-", "cmult", "cdiv"))   # ADD, SUB, MUL, DIV


cdef tuple _CW_NAMES = ("+", "-", "cmult", "cdiv")     # ADD, SUB, MUL, DIV
cdef tuple _RED_NAMES = ("sum_elems", "squared_norm", "l2_norm")
cdef tuple _PAIR_NAMES = ("dot_product", "squared_distance")


cdef int _name_bad_arg(tuple args, str name) except -1:
    # after node1/node2 refused an argument: their TypeError names the shared
    # kernel ("cwise"); say which op the user called (nothing on the good path)
    for a in args:
        expr_arg(a, name)
    return 0


cdef Expression _kind_node2(int op, int kind, object x, object y, tuple names):
    """The node of a two-argument kernel that serves the ops `names` (told apart by ia[0]);
    a refused argument is reported for names[kind]."""
    cdef int nid
    try:
        nid = node2(op, x, y)
    except TypeError:
        _name_bad_arg((x, y), names[kind])
        raise
    g_node(nid).ia[0] = kind
    return finish(nid)


cdef inline Expression _cwise(int kind, object x, object y):
    return _kind_node2(OP_CW, kind, x, y, _CW_NAMES)


def cmult(x, y):
    return _cwise(MUL, x, y)


def cdiv(x, y):
    return _cwise(DIV, x, y)

# ---------------------------------------------------------------- x * a + c

cdef int _shape_same(Graph* g, Node* n) except -1:
    n.dim = arg(g, n, 0).dim
    return 0



OP_AFFS = declare_op("scalar_affine", _shape_same)


cdef Expression _affs(object x, double a, double c):
    """x * a + c elementwise (numbers in +, -, *, / and unary minus: a and c already floats)."""
    cdef int nid = node1(OP_AFFS, x)
    g_node(nid).fa[0] = a
    g_node(nid).fa[1] = c
    return finish(nid)


def scalar_affine(x, a, c):
    """The public op: a and c are numbers (not Cython's double conversion, which names no op
    and takes True as 1.0)."""
    return _affs(x, number_arg(a, "scalar_affine", "a"), number_arg(c, "scalar_affine", "c"))


cdef bint _num(object x):
    """A real number: Python's, numpy's scalars (np.float32(2)) and 0-d arrays."""
    if isinstance(x, (int, float)):
        return True
    if isinstance(x, (Expression, complex)) or not hasattr(x, "__float__"):
        return False
    return getattr(x, "shape", ()) == () and getattr(getattr(x, "dtype", None), "kind", "f") in "biuf"


cdef object _other(str op, object x, object y):
    """NotImplemented for what Python may still pair with an Expression; a clear TypeError for an
    array, which numpy would otherwise broadcast into an object array of Expressions."""
    for v in (x, y):
        if not isinstance(v, Expression) and getattr(v, "shape", ()) != ():
            raise TypeError(
                "Expression %s %s: dyn's operators take Expressions and numbers, not an array of "
                "shape %s (make it an expression with dy.inputTensor)" % (op, type(v).__name__, v.shape))
    return NotImplemented


cpdef object add(object x, object y):
    if isinstance(y, Expression) and isinstance(x, Expression):
        return _cwise(ADD, x, y)
    if _num(y):
        return _affs(x, 1.0, float(y))
    if _num(x):
        return _affs(y, 1.0, float(x))
    return _other("+", x, y)


cpdef object sub(object x, object y):
    if isinstance(y, Expression) and isinstance(x, Expression):
        return _cwise(SUB, x, y)
    if _num(y):
        return _affs(x, 1.0, -float(y))
    if _num(x):
        return _affs(y, -1.0, float(x))
    return _other("-", x, y)


cpdef object mul(object x, object y):
    if isinstance(y, Expression) and isinstance(x, Expression):
        return matmul(x, y)
    if _num(y):
        return _affs(x, float(y), 0.0)
    if _num(x):
        return _affs(y, float(x), 0.0)
    return _other("*", x, y)


cpdef object div(object x, object y):
    if isinstance(x, Expression) and _num(y):
        return _affs(x, 1.0 / float(y), 0.0)
    raise NotImplementedError(
        "Expression / %s: only division by a number is supported (use dy.cdiv for "
        "elementwise division)" % type(y).__name__)


def neg(x):
    return _affs(x, -1.0, 0.0)


set_binop(BIN_ADD, <binop_fn>add)
set_binop(BIN_SUB, <binop_fn>sub)
set_binop(BIN_MUL, <binop_fn>mul)
set_binop(BIN_DIV, <binop_fn>div)

# ---------------------------------------------------------------- matrix product

cdef int _mm_check(Dim* a, Dim* b, str name) except -1:
    if a.nd > 2 or b.nd > 2:
        raise ValueError("%s: operands must have at most 2 dimensions, got %s and %s"
                         % (name, dim_str(a), dim_str(b)))
    if dim_cols(a) != b.d[0]:
        raise ValueError("%s: %s * %s: the left operand's %d columns do not match the "
                         "right operand's %d rows" % (name, dim_str(a), dim_str(b), dim_cols(a), b.d[0]))
    return 0


cdef int _shape_mm(Graph* g, Node* n) except -1:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    _mm_check(&a.dim, &b.dim, "matrix product (*)")
    n.dim.d[0] = a.dim.d[0]
    n.dim.d[1] = dim_cols(&b.dim)
    n.dim.nd = b.dim.nd
    n.dim.bd = batch_rule(g, n, "matrix product (*)")
    return 0


OP_MM = declare_op("matmul", _shape_mm)


cpdef Expression matmul(object x, object y):
    return finish(node2(OP_MM, x, y))

# ---------------------------------------------------------------- affine_transform

cdef int _shape_affine(Graph* g, Node* n) except -1:
    cdef Node* b = arg(g, n, 0)
    cdef int i, rows, cols
    if n.nargs % 2 != 1:
        raise ValueError("affine_transform: expected [b, W1, x1, W2, x2, ...] (an odd number "
                         "of expressions), got %d" % n.nargs)
    n.dim = b.dim
    for i in range(1, n.nargs, 2):
        W = arg(g, n, i)
        x = arg(g, n, i + 1)
        _mm_check(&W.dim, &x.dim, "affine_transform")
        rows = W.dim.d[0]
        cols = dim_cols(&x.dim)
        if rows != b.dim.d[0] or (dim_cols(&b.dim) != cols and dim_cols(&b.dim) != 1):
            raise ValueError("affine_transform: term %d is %dx%d but the bias is %s (%s)"
                             % (i // 2, rows, cols, dim_str(&b.dim), arg_dims(g, n)))
        if cols != 1 or x.dim.nd > 1:
            n.dim.nd = 2
            n.dim.d[1] = cols
    n.dim.bd = batch_rule(g, n, "affine_transform")
    return 0


OP_AFFINE = declare_op("affine_transform", _shape_affine)


def affine_transform(exprs):
    return finish(noden(OP_AFFINE, exprs, "affine_transform"))

# ---------------------------------------------------------------- esum

cdef int _shape_esum(Graph* g, Node* n) except -1:
    return same_dims_rule(g, n, "esum")


OP_ESUM = declare_op("esum", _shape_esum)


def esum(xs):
    return finish(noden(OP_ESUM, xs, "esum"))

# ---------------------------------------------------------------- reductions to one value per batch element

cdef int _shape_scalar(Graph* g, Node* n) except -1:
    n.dim.nd = 1
    n.dim.d[0] = 1
    n.dim.bd = arg(g, n, 0).dim.bd
    return 0


OP_RED = declare_labelled("reduce_elems", _shape_scalar, 0, ("sum_elems", "squared_norm", "l2_norm"))


cdef Expression _reduce(object x, int kind):
    cdef int nid
    try:
        nid = node1(OP_RED, x)
    except TypeError:
        _name_bad_arg((x,), _RED_NAMES[kind])
        raise
    g_node(nid).ia[0] = kind
    return finish(nid)


def sum_elems(x):
    return _reduce(x, 0)


def squared_norm(x):
    return _reduce(x, 1)


def l2_norm(x):
    return _reduce(x, 2)

# ---------------------------------------------------------------- dot_product, squared_distance

cdef int _shape_pair_scalar(Graph* g, Node* n) except -1:
    cdef Node* a = arg(g, n, 0)
    cdef Node* b = arg(g, n, 1)
    cdef str name = "dot_product" if n.ia[0] == 0 else "squared_distance"
    if not dim_eq_nobatch(&a.dim, &b.dim):
        raise ValueError("%s: dimensions must match, got %s and %s" % (name, dim_str(&a.dim), dim_str(&b.dim)))
    n.dim.nd = 1
    n.dim.d[0] = 1
    n.dim.bd = batch_rule(g, n, name)
    return 0


OP_PAIR = declare_labelled("pair_reduce", _shape_pair_scalar, 0, ("dot_product", "squared_distance"))


def dot_product(x, y):
    return _kind_node2(OP_PAIR, 0, x, y, _PAIR_NAMES)


def squared_distance(x, y):
    return _kind_node2(OP_PAIR, 1, x, y, _PAIR_NAMES)

# ---------------------------------------------------------------- sum_batches

cdef int _shape_sumb(Graph* g, Node* n) except -1:
    n.dim = arg(g, n, 0).dim
    n.dim.bd = 1
    return 0


OP_SUMB = declare_op("sum_batches", _shape_sumb)


def sum_batches(x):
    return finish(node1(OP_SUMB, x))

# ---------------------------------------------------------------- automatic batching (dyn/_core/core/autobatch.pyx)
set_autobatch(OP_CW, AB_ON | AB_BCAST)
set_autobatch(OP_AFFS, AB_ON)
set_autobatch(OP_MM, AB_ON | AB_BCAST, 1)              # W x_1, W x_2, ... -> W [x_1 x_2 ...]
set_autobatch(OP_AFFINE, AB_ON | AB_BCAST | AB_SHARE_ODD)  # b and the W_i shared, the x_i concatenated
set_autobatch(OP_ESUM, AB_ON | AB_BCAST)
set_autobatch(OP_RED, AB_ON)
set_autobatch(OP_PAIR, AB_ON | AB_BCAST)
