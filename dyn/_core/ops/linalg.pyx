# cython: language_level=3
"""Linear algebra: colwise_add, the 3-d contractions, inverse, logdet,
trace_of_product, circular convolution and correlation, kmh_ngram and
to_device (the fused LSTM nodes are in rnn.pyx). Each op: shape rule, argument
checks, node constructors; its CPU kernels are in dyn/_core/cpu/linalg.pyx.

Ops that DyNet runs on unbatched tensors only (inverse, logdet,
trace_of_product, contract3d_1d_1d, circ_conv/corr, kmh_ngram) reject a
batched argument when the expression is created.
"""
from dyn._core.core.graph cimport Graph, Node, declare_op, dim_cols, dim_str, arg, dim_eq_nobatch
from dyn._core.core.expr cimport node1, noden, finish
from dyn._core.ops.util cimport (
    arg_dims, batch_rule, binary, binary_kind, declare_labelled, expr_arg, g_node, int_arg, looks_like_vector,
    out_like)

# ---------------------------------------------------------------- helpers


cdef int _unbatched(Graph* g, Node* n, str name) except -1:
    cdef int i
    for i in range(n.nargs):
        if arg(g, n, i).dim.bd != 1:
            raise ValueError("%s: batched arguments are not supported (as in DyNet), got %s; "
                             "apply it to each batch element" % (name, arg_dims(g, n)))
    return 0


# ---------------------------------------------------------------- colwise_add

cdef int _shape_cwa(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef Node* y = arg(g, n, 1)
    if x.dim.nd != 2 or y.dim.nd > 2 or not looks_like_vector(&y.dim) or y.dim.d[0] != x.dim.d[0]:
        raise ValueError("colwise_add: x must be an M x N matrix and y a vector of M rows, got %s and %s"
                         % (dim_str(&x.dim), dim_str(&y.dim)))
    return out_like(g, n, x, "colwise_add")


OP_CWA = declare_op("colwise_add", _shape_cwa)


def colwise_add(x, y):
    return binary(OP_CWA, x, y, "colwise_add")

# ---------------------------------------------------------------- contract3d_1d(_bias): z_ij = sum_k x_ijk y_k (+ b_ij)

cdef int _shape_c31(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef Node* y = arg(g, n, 1)
    cdef str name = "contract3d_1d_bias" if n.nargs == 3 else "contract3d_1d"
    if x.dim.nd != 3 or not looks_like_vector(&y.dim) or y.dim.d[0] != x.dim.d[2]:
        raise ValueError("%s: x must be a 3-d tensor {I,J,K} and y a vector {K}, got %s and %s"
                         % (name, dim_str(&x.dim), dim_str(&y.dim)))
    n.dim.nd = 2
    n.dim.d[0] = x.dim.d[0]
    n.dim.d[1] = x.dim.d[1]
    if n.nargs == 3 and not dim_eq_nobatch(&arg(g, n, 2).dim, &n.dim):
        raise ValueError("%s: the bias must be {%d,%d} like the result, got %s"
                         % (name, n.dim.d[0], n.dim.d[1], dim_str(&arg(g, n, 2).dim)))
    n.dim.bd = batch_rule(g, n, name)
    return 0


OP_C31 = declare_op("contract3d_1d", _shape_c31)


def contract3d_1d(x, y):
    return binary(OP_C31, x, y, "contract3d_1d")


def contract3d_1d_bias(x, y, b):
    for e in (x, y, b):
        expr_arg(e, "contract3d_1d_bias")
    return finish(noden(OP_C31, [x, y, b], "contract3d_1d_bias"))

# ---------------------------------------------------------------- contract3d_1d_1d(_bias): t_i = sum_jk x_ijk y_k z_j (+ b_i)

cdef int _shape_c311(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef Node* y = arg(g, n, 1)
    cdef Node* z = arg(g, n, 2)
    cdef str name = "contract3d_1d_1d_bias" if n.nargs == 4 else "contract3d_1d_1d"
    if (x.dim.nd != 3 or not looks_like_vector(&y.dim) or not looks_like_vector(&z.dim) or y.dim.d[0] != x.dim.d[2]
            or z.dim.d[0] != x.dim.d[1]):
        raise ValueError("%s: x must be a 3-d tensor {I,J,K}, y a vector {K} and z a vector {J}, "
                         "got %s" % (name, arg_dims(g, n)))
    if n.nargs == 4 and (not looks_like_vector(&arg(g, n, 3).dim) or arg(g, n, 3).dim.d[0] != x.dim.d[0]):
        raise ValueError("%s: the bias must be a vector {%d}, got %s"
                         % (name, x.dim.d[0], dim_str(&arg(g, n, 3).dim)))
    _unbatched(g, n, name)
    n.dim.nd = 1
    n.dim.d[0] = x.dim.d[0]
    n.dim.bd = 1
    n.naux = 2 * x.dim.d[0] * x.dim.d[1]    # x.y (I x J), kept for dz; dt z^T scratch
    return 0


OP_C311 = declare_op("contract3d_1d_1d", _shape_c311)


def contract3d_1d_1d(x, y, z):
    for e in (x, y, z):
        expr_arg(e, "contract3d_1d_1d")
    return finish(noden(OP_C311, [x, y, z], "contract3d_1d_1d"))


def contract3d_1d_1d_bias(x, y, z, b):
    for e in (x, y, z, b):
        expr_arg(e, "contract3d_1d_1d_bias")
    return finish(noden(OP_C311, [x, y, z, b], "contract3d_1d_1d_bias"))

# ---------------------------------------------------------------- inverse, logdet (LU with partial pivoting, in double)
# aux (bytes): LU n*n doubles | inverse n*n doubles | pivots n ints (8-aligned) | n*n items (backward scratch)

cdef int _shape_square(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef str name = "inverse" if n.ia[0] == INVERSE else "logdet"
    cdef long m = x.dim.d[0], nbytes
    if x.dim.nd > 2 or dim_cols(&x.dim) != m:
        raise ValueError("%s: x must be a square matrix, got %s" % (name, dim_str(&x.dim)))
    _unbatched(g, n, name)
    if n.ia[0] == INVERSE:
        n.dim = x.dim
    else:
        n.dim.nd = 1
        n.dim.d[0] = 1
        n.dim.bd = 1
    nbytes = 16 * m * m + (4 * m + 7) // 8 * 8 + m * m * g.itemsize
    n.naux = (nbytes + g.itemsize - 1) // g.itemsize
    return 0


OP_SQUARE = declare_labelled("inverse_logdet", _shape_square, 0, ("inverse", "logdet"))   # INVERSE, LOGDET


def inverse(x):
    expr_arg(x, "inverse")
    cdef int nid = node1(OP_SQUARE, x)
    g_node(nid).ia[0] = INVERSE
    return finish(nid)


def logdet(x):
    expr_arg(x, "logdet")
    cdef int nid = node1(OP_SQUARE, x)
    g_node(nid).ia[0] = LOGDET
    return finish(nid)

# ---------------------------------------------------------------- trace_of_product: tr(x y^T) = sum_ij x_ij y_ij

cdef int _shape_top(Graph* g, Node* n) except -1:
    if not dim_eq_nobatch(&arg(g, n, 0).dim, &arg(g, n, 1).dim):
        raise ValueError("trace_of_product: x and y must have the same dimensions, got %s" % arg_dims(g, n))
    _unbatched(g, n, "trace_of_product")
    n.dim.nd = 1
    n.dim.d[0] = 1
    n.dim.bd = 1
    return 0


OP_TOP = declare_op("trace_of_product", _shape_top)


def trace_of_product(x, y):
    return binary(OP_TOP, x, y, "trace_of_product")

# ---------------------------------------------------------------- circ_conv, circ_corr (direct O(n^2): vectors are short)

cdef int _shape_circ(Graph* g, Node* n) except -1:
    cdef Node* u = arg(g, n, 0)
    cdef Node* v = arg(g, n, 1)
    cdef str name = "circ_conv" if n.ia[0] == CONV else "circ_corr"
    if not looks_like_vector(&u.dim) or not looks_like_vector(&v.dim) or u.dim.d[0] != v.dim.d[0]:
        raise ValueError("%s: u and v must be vectors of the same size, got %s" % (name, arg_dims(g, n)))
    _unbatched(g, n, name)
    n.dim = u.dim
    return 0


OP_CIRC = declare_labelled("circ_conv_corr", _shape_circ, 0, ("circ_conv", "circ_corr"))   # CONV, CORR


def circ_conv(u, v):
    return binary_kind(OP_CIRC, u, v, CONV, "circ_conv")


def circ_corr(u, v):
    return binary_kind(OP_CIRC, u, v, CORR, "circ_corr")

# ---------------------------------------------------------------- kmh_ngram: column j = sum of columns j..j+n-1

cdef int _shape_kmh(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    if x.dim.nd != 2 or x.dim.d[1] - n.ia[0] + 1 < 1:
        raise ValueError("kmh_ngram: x must be a matrix with at least n = %d columns, got %s"
                         % (n.ia[0], dim_str(&x.dim)))
    _unbatched(g, n, "kmh_ngram")
    n.dim = x.dim
    n.dim.d[1] = x.dim.d[1] - n.ia[0] + 1
    return 0


OP_KMH = declare_op("kmh_ngram", _shape_kmh)


def kmh_ngram(x, n):
    expr_arg(x, "kmh_ngram")
    k = int_arg(n, "kmh_ngram", "n")
    if k < 1 or k > 0x7fffffff:
        raise ValueError("kmh_ngram: n must be a positive integer, got %d" % k)
    cdef int nid = node1(OP_KMH, x)
    g_node(nid).ia[0] = k
    return finish(nid)

# ---------------------------------------------------------------- to_device
# A graph runs on one device (dyn.init(devices=...)): to_device checks that the device named is
# available and gives a copy of e on the graph's device (gradients pass through), so DyNet programs
# that move expressions between devices run unchanged.

cdef int _shape_same(Graph* g, Node* n) except -1:
    n.dim = arg(g, n, 0).dim
    return 0


OP_TODEV = declare_op("to_device", _shape_same)


def to_device(e, device_str):
    expr_arg(e, "to_device")
    if not isinstance(device_str, str):
        raise TypeError("to_device: device_str must be a string such as 'CPU' or 'GPU:0', got %r"
                        % (device_str,))
    from dyn._config import device_arg
    try:
        device_arg(device_str, "to_device")
    except (ValueError, RuntimeError) as err:
        raise type(err)("to_device: %s" % err) from None
    return finish(node1(OP_TODEV, e))
