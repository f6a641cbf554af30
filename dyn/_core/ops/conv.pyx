# cython: language_level=3
"""Convolution and pooling: conv2d / conv2d_bias, maxpooling2d, filter1d_narrow.

Layout as DyNet: a batch element of x is H x W x C, column-major (a 2-D x has
C = 1); a conv2d filter is FH x FW x Ci x Co; the output is OH x OW x Co.
Cross-correlation (no filter flip). VALID: O = ceil((X - F + 1) / s);
SAME: O = ceil(X / s) with TensorFlow's padding (the odd pixel at the end).

The definitions: shape rules (which size the kernels' scratch), argument
checks, node constructors and declare_op; the kernels (im2col + gemm) are in
dyn/_core/cpu/conv.pyx.
"""
import operator

from numpy import bool_ as np_bool
from dyn._core.core.graph cimport Graph, Node, cg, declare_op, dim_str, arg
from dyn._core.core.expr cimport node1, node2, noden, finish
from dyn._core.ops.util cimport arg_dims, batch_rule, flag_arg

# ---------------------------------------------------------------- conv2d

cdef int _shape_conv(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef Node* f = arg(g, n, 1)
    cdef Node* b
    cdef str name = "conv2d_bias" if n.nargs == 3 else "conv2d"
    cdef bint valid = n.ia[2]
    cdef int C = _dim(&x.dim, 2), K, P, OH, OW, bc
    if x.dim.nd not in (2, 3) or f.dim.nd != 4 or f.dim.d[2] != C:
        raise ValueError("%s: x must be H x W (x Ci) and f FH x FW x Ci x Co with the same Ci, got %s"
                         % (name, arg_dims(g, n)))
    if valid and (x.dim.d[0] < f.dim.d[0] or x.dim.d[1] < f.dim.d[1]):
        raise ValueError("%s: in VALID convolution the filter must not be larger than the input, got %s"
                         % (name, arg_dims(g, n)))
    if n.nargs == 3:
        b = arg(g, n, 2)
        if b.dim.nd != 1 or b.dim.d[0] != f.dim.d[3]:
            raise ValueError("%s: the bias must be a vector of Co = %d elements, got %s"
                             % (name, f.dim.d[3], arg_dims(g, n)))
    n.dim.bd = batch_rule(g, n, name)
    OH = _out(x.dim.d[0], f.dim.d[0], n.ia[0], valid)
    OW = _out(x.dim.d[1], f.dim.d[1], n.ia[1], valid)
    n.dim.nd = 3
    n.dim.d[0] = OH
    n.dim.d[1] = OW
    n.dim.d[2] = f.dim.d[3]
    K = f.dim.d[0] * f.dim.d[1] * C
    P = OH * OW
    bc = x.dim.bd if x.dim.bd > f.dim.bd else f.dim.bd
    n.naux = <long>P * x.dim.bd * K + (<long>P * bc * f.dim.d[3] if n.dim.bd > 1 else 0)
    return 0


OP_CONV = declare_op("conv2d", _shape_conv)
OP_CONVB = declare_op("conv2d_bias", _shape_conv)   # the same kernel, 3 args


cdef tuple _pair(object v, str name, str what):
    """DyNet's vector[unsigned] of two positive ints (any iterable)."""
    if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        raise TypeError("%s: %s must be a list of two integers, got %r" % (name, what, v))
    v = list(v)
    if len(v) != 2:
        raise ValueError("%s: %s must have two elements (rows, columns), got %r" % (name, what, v))
    for i in range(2):
        e = v[i]
        if type(e) is not int:
            # True is no size; a numpy array has __index__ but is no integer either
            if isinstance(e, (float, bool, np_bool)) or not hasattr(e, "__index__"):
                raise TypeError("%s: %s must be integers, got %r" % (name, what, v))
            try:
                v[i] = e = operator.index(e)
            except TypeError:
                raise TypeError("%s: %s must be integers, got %r" % (name, what, v)) from None
        if e <= 0 or e > 0x7fffffff:
            raise ValueError("%s: %s must be positive, got %r" % (name, what, v))
    return v[0], v[1]


def conv2d(x, f, stride, is_valid=True, b=None):
    """conv2d(x, f, stride, is_valid) or, with b, conv2d_bias."""
    name = "conv2d" if b is None else "conv2d_bias"
    sh, sw = _pair(stride, name, "stride")
    cdef int nid = node2(OP_CONV, x, f) if b is None else noden(OP_CONVB, [x, f, b], name)
    cdef Node* n = &cg().nodes[nid]
    n.ia[0] = sh
    n.ia[1] = sw
    n.ia[2] = 1 if is_valid else 0
    n.ia[5] = 0
    return finish(nid)

# ---------------------------------------------------------------- maxpooling2d

cdef int _shape_pool(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef bint valid = n.ia[2]
    if x.dim.nd not in (2, 3):
        raise ValueError("maxpooling2d: x must be H x W or H x W x C, got %s" % dim_str(&x.dim))
    if valid and (x.dim.d[0] < n.ia[3] or x.dim.d[1] < n.ia[4]):
        raise ValueError("maxpooling2d: in VALID pooling the window (%d, %d) must not be larger than "
                         "the input %s" % (n.ia[3], n.ia[4], dim_str(&x.dim)))
    n.dim = x.dim
    n.dim.d[0] = _out(x.dim.d[0], n.ia[3], n.ia[0], valid)
    n.dim.d[1] = _out(x.dim.d[1], n.ia[4], n.ia[1], valid)
    return 0


# scratch: the argmax of each output element (an int fits in a float's slot)
OP_POOL = declare_op("maxpooling2d", _shape_pool, 1)


def maxpooling2d(x, ksize, stride, is_valid=True):
    kh, kw = _pair(ksize, "maxpooling2d", "ksize")
    sh, sw = _pair(stride, "maxpooling2d", "stride")
    cdef bint valid = flag_arg(is_valid, "maxpooling2d", "is_valid")
    cdef int nid = node1(OP_POOL, x)
    cdef Node* n = &cg().nodes[nid]
    n.ia[0] = sh
    n.ia[1] = sw
    n.ia[2] = valid
    n.ia[3] = kh
    n.ia[4] = kw
    return finish(nid)

# ---------------------------------------------------------------- filter1d_narrow
# x: n x s, f: n x d x fids; y[fid, j] = sum_{i,k} f[i, k, fid] x[i, j + k].
# Column j of the patch matrix is the contiguous run x[:, j : j + d] (K = n d
# items), so Col is K x (ofl * xb) and Y = F^T Col is one gemm whose output is
# already fids x ofl per batch element, batches side by side.

cdef int _shape_f1d(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef Node* f = arg(g, n, 1)
    cdef int rows = x.dim.d[0], s = _dim(&x.dim, 1), d = _dim(&f.dim, 1)
    if x.dim.nd > 2 or f.dim.nd > 3 or f.dim.d[0] != rows or d > s:
        raise ValueError("filter1d_narrow: x must be n x s and f n x d (x fids) with d <= s, got %s"
                         % arg_dims(g, n))
    n.dim.nd = 2
    n.dim.d[0] = _dim(&f.dim, 2)
    n.dim.d[1] = s - d + 1
    n.dim.bd = batch_rule(g, n, "filter1d_narrow")
    n.naux = <long>rows * d * n.dim.d[1] * x.dim.bd
    return 0


OP_F1D = declare_op("filter1d_narrow", _shape_f1d)


def filter1d_narrow(x, f):
    cdef int nid = node2(OP_F1D, x, f)
    cdef Node* n = &cg().nodes[nid]
    n.ia[5] = 0
    return finish(nid)
