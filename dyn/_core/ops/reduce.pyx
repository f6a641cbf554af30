# cython: language_level=3
"""Reductions and moments: sums, means, moments, standard deviations, max/min
and log-sum-exp over any set of dims (and/or the batch), cumulative sums,
fold_rows and k-max pooling.

The definitions: shape rules, argument checks, node constructors and
declare_op. Every reduction is one op kernel (dyn/_core/cpu/reduce.pyx) that
reads what to reduce from the node's attributes (see reduce.pxd).
"""

from cpython.long cimport PyLong_AsLongAndOverflow
from dyn._core.core.graph cimport Graph, Node, Dim, cg, declare_op, dim_total, dim_str, arg, op_name
from dyn._core.core.expr cimport node1, finish, Expression
from dyn._core.cpu.bcast cimport _ext
from dyn._core.ops.util cimport expr_arg, flag_arg, int_arg

# which dims (ia[3]): those in the mask, every dim, or a bad d to report
cdef enum:
    D_OK, D_ALL, D_RANGE, D_TWICE

# ---------------------------------------------------------------- shape rules

cdef int _set_aux(Graph* g, Node* n) except -1:
    # naux counts items of the graph's float type: AUX_BYTES per output, rounded up
    n.naux = (<long>dim_total(&n.dim) * AUX_BYTES + g.itemsize - 1) // g.itemsize
    return 0


cdef int _shape_red(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef int k, nd = x.dim.nd
    cdef unsigned mask = n.ia[1]
    if n.ia[3] == D_ALL:
        mask |= (1u << nd) - 1
    elif n.ia[3] == D_TWICE:
        raise ValueError("%s: dimension %d is listed twice (expression dim %s)"
                         % (op_name(n.op), <int>n.fa[1], dim_str(&x.dim)))
    for k in range(7):
        if (n.ia[3] == D_RANGE and k == 0) or (k >= nd and mask & (1u << k)):
            raise ValueError("%s: dimension %d is out of range for an expression of dim %s "
                             "(0 <= d < %d)" % (op_name(n.op), <int>n.fa[1] if n.ia[3] == D_RANGE else k,
                                                 dim_str(&x.dim), nd))
    if mask == 0:
        raise ValueError("%s: nothing to reduce: give at least one dimension or b=True "
                         "(expression dim %s)" % (op_name(n.op), dim_str(&x.dim)))
    n.ia[1] = mask
    n.dim.nd = 0
    for k in range(nd):
        if not (mask & (1u << k)):
            n.dim.d[n.dim.nd] = x.dim.d[k]
            n.dim.nd += 1
    if n.dim.nd == 0:
        n.dim.nd = 1
        n.dim.d[0] = 1
    n.dim.bd = 1 if n.ia[2] else x.dim.bd
    return _set_aux(g, n)


cdef int _shape_fold(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef int m = n.ia[4], rows = x.dim.d[0]
    if x.dim.nd > 2:
        raise ValueError("fold_rows: the input must be a vector or matrix, got dim %s" % dim_str(&x.dim))
    if rows % m != 0:
        raise ValueError("fold_rows: %d rows do not fold in groups of nrows=%d (expression dim %s)"
                         % (rows, m, dim_str(&x.dim)))
    # DyNet's result is always a matrix {rows / nrows, cols}
    n.dim.nd = 2
    n.dim.d[0] = rows // m
    n.dim.d[1] = _ext(&x.dim, 1)
    n.dim.bd = x.dim.bd
    return _set_aux(g, n)


OP_SUM_DIM = declare_op("sum_dim", _shape_red)
OP_MEAN_DIM = declare_op("mean_dim", _shape_red)
OP_STD_DIM = declare_op("std_dim", _shape_red)
OP_MOMENT_DIM = declare_op("moment_dim", _shape_red)
OP_MEAN_ELEMS = declare_op("mean_elems", _shape_red)
OP_STD_ELEMS = declare_op("std_elems", _shape_red)
OP_MOMENT_ELEMS = declare_op("moment_elems", _shape_red)
OP_MEAN_BATCHES = declare_op("mean_batches", _shape_red)
OP_STD_BATCHES = declare_op("std_batches", _shape_red)
OP_MOMENT_BATCHES = declare_op("moment_batches", _shape_red)
OP_MAX_DIM = declare_op("max_dim", _shape_red)
OP_MIN_DIM = declare_op("min_dim", _shape_red)
OP_LSE_DIM = declare_op("logsumexp_dim", _shape_red)
OP_FOLD = declare_op("fold_rows", _shape_fold)

# ---------------------------------------------------------------- builders
# The builder turns d into a bit mask (ia[1]); what it cannot encode there (a
# dim outside 0..6, a repeated dim) goes to ia[3] / fa[1] for the shape rule,
# which knows the Dim to put in the message.


cdef long _int(object v, str name, str what, long lo) except? -1:
    """An int-like (not a float) >= lo that fits a C int."""
    if type(v) is not int:
        v = int_arg(v, name, what)      # not a bool, a float or an array
    if v < lo:
        raise ValueError("%s: %s must be >= %d, got %d" % (name, what, lo, v))
    if v > 0x7fffffff:
        raise ValueError("%s: %s %d is out of range" % (name, what, v))
    return v


cdef int _dim_arg(object v, int op) except? -1:
    # range checks are the shape rule's, which can name the Dim
    cdef int over
    cdef long k
    if type(v) is not int:
        v = int_arg(v, op_name(op), "each dimension of d")     # not a bool, a float or an array
    k = PyLong_AsLongAndOverflow(v, &over)
    if over or k > 0x7fffffff or k < -0x7fffffff:
        return 0x7fffffff if over > 0 or k > 0 else -0x7fffffff
    return <int>k


cdef inline int _check_list(object d, int op) except -1:
    # DyNet types d as `list`: a tuple or range is a TypeError there too
    if not isinstance(d, list):
        raise TypeError("%s: d must be a list of dimensions, got %s" % (op_name(op), type(d).__name__))
    return 0


cdef Expression _reduction(int op, object x, list dims, bint alldims, bint batch, int kind, int r,
                           bint divide, double divisor):
    """Reduce the dims listed (every dim if alldims), and the batch if batch."""
    cdef unsigned mask = 0
    cdef int k, err = D_ALL if alldims else D_OK
    cdef long bad = 0
    for v in dims:
        k = _dim_arg(v, op)
        if err == D_OK and (k < 0 or k >= 7 or mask & (1u << k)):
            err = D_RANGE if k < 0 or k >= 7 else D_TWICE
            bad = k
        elif 0 <= k < 7:
            mask |= 1u << k
    cdef int nid = node1(op, x)
    cdef Node* n = &cg().nodes[nid]
    n.ia[0] = kind
    n.ia[1] = mask | ((1u << 7) if batch else 0)
    n.ia[2] = batch
    n.ia[3] = err
    n.ia[4] = r
    n.ia[5] = divide
    n.fa[0] = divisor
    n.fa[1] = bad
    return finish(nid)


def sum_dim(x, d, b=False, n=0):
    expr_arg(x, "sum_dim")
    _check_list(d, OP_SUM_DIM)
    _int(n, "sum_dim", "n", 0)      # ignored, as DyNet's (unsigned) n, but still an integer
    return _reduction(OP_SUM_DIM, x, d, False, flag_arg(b, "sum_dim", "b"), K_SUM, 1, False, 0)


def moment_dim(x, d, r, b, n=0, bint mean=False):
    cdef str name = "mean_dim" if mean else "moment_dim"
    cdef int op = OP_MEAN_DIM if mean else OP_MOMENT_DIM
    expr_arg(x, name)
    _check_list(d, op)
    r = _int(r, name, "r", 1)
    n = _int(n, name, "n", 0)
    return _reduction(op, x, d, False, b, K_SUM if r == 1 else K_POW, r, True, n)


def std_dim(x, d, b):
    expr_arg(x, "std_dim")
    _check_list(d, OP_STD_DIM)
    return _reduction(OP_STD_DIM, x, d, False, b, K_STD, 1, False, 0)


cdef Expression _whole(object x, object r, int op, str name, bint elems, bint std):
    """moment_elems / moment_batches (and their means; std: std_elems / std_batches, r unused):
    over every element, or over the batch."""
    expr_arg(x, name)
    if std:
        return _reduction(op, x, [], elems, not elems, K_STD, 1, False, 0)
    r = _int(r, name, "r", 1)
    return _reduction(op, x, [], elems, not elems, K_SUM if r == 1 else K_POW, r, True, 0)


def moment_elems(x, r, bint mean=False):
    return _whole(x, r, OP_MEAN_ELEMS if mean else OP_MOMENT_ELEMS,
                  "mean_elems" if mean else "moment_elems", True, False)


def std_elems(x):
    return _whole(x, 1, OP_STD_ELEMS, "std_elems", True, True)


def moment_batches(x, r, bint mean=False):
    return _whole(x, r, OP_MEAN_BATCHES if mean else OP_MOMENT_BATCHES,
                  "mean_batches" if mean else "moment_batches", False, False)


def std_batches(x):
    return _whole(x, 1, OP_STD_BATCHES, "std_batches", False, True)


def max_dim(x, d, bint mn=False):
    expr_arg(x, "min_dim" if mn else "max_dim")
    return _reduction(OP_MIN_DIM if mn else OP_MAX_DIM, x, [d], False, False, K_MIN if mn else K_MAX,
                      1, False, 0)


def logsumexp_dim(x, d):
    expr_arg(x, "logsumexp_dim")
    return _reduction(OP_LSE_DIM, x, [d], False, False, K_LSE, 1, False, 0)


def fold_rows(x, nrows):
    expr_arg(x, "fold_rows")
    nrows = _int(nrows, "fold_rows", "nrows", 1)
    return _reduction(OP_FOLD, x, [], False, False, K_SUM, nrows, False, 0)

# ---------------------------------------------------------------- along one dim: cumsum, kmax_pooling
# Per batch element the input is inner x L x outer (L the size of dim d; the
# batch is folded into outer). ia[0] = d, ia[1] = k (kmax_pooling).

cdef int _check_d(Node* n, Node* x, str name) except -1:
    if n.ia[0] < 0 or n.ia[0] >= x.dim.nd:
        raise ValueError("%s: dimension %d is out of range for an expression of dim %s (0 <= d < %d)"
                         % (name, n.ia[0], dim_str(&x.dim), x.dim.nd))
    return 0


cdef int _shape_cumsum(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    _check_d(n, x, "cumsum")
    n.dim = x.dim
    return 0


OP_CUMSUM = declare_op("cumsum", _shape_cumsum)


def cumsum(x, d):
    expr_arg(x, "cumsum")
    cdef int dd = _dim_arg(d, OP_CUMSUM)
    cdef int nid = node1(OP_CUMSUM, x)
    cg().nodes[nid].ia[0] = dd
    return finish(nid)


cdef int _shape_kmax(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef int d = n.ia[0], k = n.ia[1]
    _check_d(n, x, "kmax_pooling")
    if k > x.dim.d[d]:
        raise ValueError("kmax_pooling: k=%d is larger than dim %d of size %d (expression dim %s)"
                         % (k, d, x.dim.d[d], dim_str(&x.dim)))
    n.dim = x.dim
    n.dim.d[d] = k
    # one int per output: which input it came from (itemsize >= 4)
    n.naux = dim_total(&n.dim)
    return 0


OP_KMAX = declare_op("kmax_pooling", _shape_kmax)


def kmax_pooling(x, k, d):
    expr_arg(x, "kmax_pooling")
    k = _int(k, "kmax_pooling", "k", 1)
    cdef int dd = _dim_arg(d, OP_KMAX)
    cdef int nid = node1(OP_KMAX, x)
    cg().nodes[nid].ia[0] = dd
    cg().nodes[nid].ia[1] = k
    return finish(nid)
