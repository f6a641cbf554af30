# cython: language_level=3, boundscheck=False, wraparound=False
"""Linear algebra: colwise_add, the 3-d contractions, inverse, logdet,
trace_of_product, circular convolution and correlation, kmh_ngram and
to_device (the fused LSTM nodes are in _k_lstm.pyx). Each op: shape rule,
forward, backward (accumulating), side by side.

Ops that DyNet runs on unbatched tensors only (inverse, logdet,
trace_of_product, contract3d_1d_1d, circ_conv/corr, kmh_ngram) reject a
batched argument when the expression is created.
"""
import operator

from libc.math cimport log, fabs
from libc.string cimport memcpy
from dyn._core.core.graph import set_labels
from dyn._core.core.graph cimport (
    Graph, Node, Dim, cg, declare_op, set_kernels, shape_fn, kfwd_fn, kbwd_fn, DEV_CPU, dim_size,
    dim_total, dim_cols, dim_str, arg, dim_eq_nobatch)
from dyn._core.core.expr cimport node1, node2, noden, finish, Expression
from dyn._core.core.types cimport real, real_dtype
from dyn._core.cpu cimport blas as _blas
from dyn._core.ops.util cimport batch_ptr, arg_dims, batch_rule, expr_arg, g_node, int_arg, looks_like_vector

# ---------------------------------------------------------------- helpers
# Kernels are fused over `real` (float32/float64): y is the node's value, gy its gradient; the
# kernel table holds both specialisations (set_kernels), so no kernel asks which float type it runs in.


cdef int _op(str name, shape_fn shape, kfwd_fn f32, kfwd_fn f64, kbwd_fn b32, kbwd_fn b64,
             int aux=0) except -1:
    """declare_op, then the CPU kernels of both float types."""
    cdef int op = declare_op(name, shape, aux)
    set_kernels(op, DEV_CPU, f32, f64, b32, b64)
    return op


cdef int _unbatched(Graph* g, Node* n, str name) except -1:
    cdef int i
    for i in range(n.nargs):
        if arg(g, n, i).dim.bd != 1:
            raise ValueError("%s: batched arguments are not supported (as in DyNet), got %s; "
                             "apply it to each batch element" % (name, arg_dims(g, n)))
    return 0


cdef void _bias_bwd(Graph* g, Node* n, Node* b, real* gy) noexcept:
    """gb += gy, summed over the batch when b was broadcast."""
    cdef int k, s = dim_size(&n.dim)
    if b.dim.bd == n.dim.bd:
        _blas.axpy(real_dtype(gy), s * n.dim.bd, 1.0, gy, b.g)
    else:
        for k in range(n.dim.bd):
            _blas.axpy(real_dtype(gy), s, 1.0, gy + <size_t>k * s, b.g)


cdef void _bias_fwd(Graph* g, Node* n, Node* b, real* y) noexcept:
    cdef int k, s = dim_size(&n.dim)
    for k in range(n.dim.bd):
        memcpy(y + <size_t>k * s, batch_ptr(b.v, k, b.dim.bd, s, sizeof(real)), <size_t>s * sizeof(real))


cdef void fwd_copy(Graph* g, Node* n, real* y) noexcept:
    memcpy(y, arg(g, n, 0).v, <size_t>dim_total(&n.dim) * sizeof(real))


cdef void bwd_identity(Graph* g, Node* n, int i, real* gy) noexcept:
    _blas.axpy(real_dtype(gy), dim_total(&n.dim), 1.0, gy, arg(g, n, 0).g)

# ---------------------------------------------------------------- colwise_add

cdef int _shape_cwa(Graph* g, Node* n) except -1:
    cdef Node* x = arg(g, n, 0)
    cdef Node* y = arg(g, n, 1)
    if x.dim.nd != 2 or y.dim.nd > 2 or not looks_like_vector(&y.dim) or y.dim.d[0] != x.dim.d[0]:
        raise ValueError("colwise_add: x must be an M x N matrix and y a vector of M rows, got %s and %s"
                         % (dim_str(&x.dim), dim_str(&y.dim)))
    n.dim = x.dim
    n.dim.bd = batch_rule(g, n, "colwise_add")
    return 0


cdef void _cwa_fwd(real* y, real* x, real* v, int m, int c, int B, int bx, int bv) noexcept nogil:
    cdef int b, i, j
    cdef real* px
    cdef real* pv
    cdef real* py
    for b in range(B):
        px = x + (b * m * c if bx > 1 else 0)
        pv = v + (b * m if bv > 1 else 0)
        py = y + b * m * c
        # (column pointers stepped, not j * m + i: with the indexed form, gcc kept this loop's
        # pointers on the stack once it was a fused kernel of its own, 30% slower)
        for j in range(c):
            for i in range(m):
                py[i] = px[i] + pv[i]
            px += m
            py += m


cdef void _cwa_bwd(real* gx, real* gy, int m, int c, int B, int bx, int which) noexcept nogil:
    cdef int b, i, j
    cdef real* pg
    cdef real* px
    for b in range(B):
        pg = gy + b * m * c
        if which == 0:
            px = gx + (b * m * c if bx > 1 else 0)
            for i in range(m * c):
                px[i] += pg[i]
        else:
            px = gx + (b * m if bx > 1 else 0)
            for j in range(c):
                for i in range(m):
                    px[i] += pg[j * m + i]


cdef void fwd_cwa(Graph* g, Node* n, real* y) noexcept:
    cdef Node* x = arg(g, n, 0)
    cdef Node* v = arg(g, n, 1)
    _cwa_fwd(y, <real*>x.v, <real*>v.v, n.dim.d[0], n.dim.d[1], n.dim.bd, x.dim.bd, v.dim.bd)


cdef void bwd_cwa(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* a = arg(g, n, i)
    _cwa_bwd(<real*>a.g, gy, n.dim.d[0], n.dim.d[1], n.dim.bd, a.dim.bd, i)


cdef int OP_CWA = _op("colwise_add", _shape_cwa, <kfwd_fn>fwd_cwa[float], <kfwd_fn>fwd_cwa[double],
                      <kbwd_fn>bwd_cwa[float], <kbwd_fn>bwd_cwa[double])


def colwise_add(x, y):
    expr_arg(x, "colwise_add")
    expr_arg(y, "colwise_add")
    return finish(node2(OP_CWA, x, y))

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


cdef void fwd_c31(Graph* g, Node* n, real* out) noexcept:
    cdef Node* x = arg(g, n, 0)
    cdef Node* y = arg(g, n, 1)
    cdef int IJ = dim_size(&n.dim), K = x.dim.d[2], B = n.dim.bd, b, isz = sizeof(real)
    cdef int dt = real_dtype(out)
    cdef double beta = 0.0
    if n.nargs == 3:
        _bias_fwd(g, n, arg(g, n, 2), out)
        beta = 1.0
    if x.dim.bd == 1 and y.dim.bd == B:
        # x shared: one product of the (IJ x K) unfolding with all the y columns
        _blas.matmul_cols(dt, b'N', IJ, B, K, x.v, IJ, y.v, beta, out)
        return
    for b in range(B):
        _blas.gemv(dt, b'N', IJ, K, 1.0, batch_ptr(x.v, b, x.dim.bd, IJ * K, isz), IJ,
                   batch_ptr(y.v, b, y.dim.bd, K, isz), beta, out + <size_t>b * IJ)


cdef void bwd_c31(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* x = arg(g, n, 0)
    cdef Node* y = arg(g, n, 1)
    cdef int IJ = dim_size(&n.dim), K = x.dim.d[2], B = n.dim.bd, b, isz = sizeof(real)
    cdef int dt = real_dtype(gy)
    if i == 2:
        _bias_bwd(g, n, arg(g, n, 2), gy)
    elif i == 0 and x.dim.bd == 1 and y.dim.bd == B:
        _blas.outer_acc(dt, IJ, K, B, gy, y.v, x.g)
    else:
        for b in range(B):
            if i == 0:
                _blas.ger(dt, IJ, K, 1.0, gy + <size_t>b * IJ,
                          batch_ptr(y.v, b, y.dim.bd, K, isz), batch_ptr(x.g, b, x.dim.bd, IJ * K, isz), IJ)
            else:
                _blas.gemv(dt, b'T', IJ, K, 1.0, batch_ptr(x.v, b, x.dim.bd, IJ * K, isz), IJ,
                           gy + <size_t>b * IJ, 1.0, batch_ptr(y.g, b, y.dim.bd, K, isz))


cdef int OP_C31 = _op("contract3d_1d", _shape_c31, <kfwd_fn>fwd_c31[float], <kfwd_fn>fwd_c31[double],
                      <kbwd_fn>bwd_c31[float], <kbwd_fn>bwd_c31[double])


def contract3d_1d(x, y):
    expr_arg(x, "contract3d_1d")
    expr_arg(y, "contract3d_1d")
    return finish(node2(OP_C31, x, y))


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


cdef void fwd_c311(Graph* g, Node* n, real* y) noexcept:
    cdef Node* x = arg(g, n, 0)
    cdef int I = x.dim.d[0], J = x.dim.d[1], K = x.dim.d[2]
    cdef int dt = real_dtype(y)
    cdef double beta = 0.0
    _blas.gemv(dt, b'N', I * J, K, 1.0, x.v, I * J, arg(g, n, 1).v, 0.0, n.aux)
    if n.nargs == 4:
        _bias_fwd(g, n, arg(g, n, 3), y)
        beta = 1.0
    _blas.gemv(dt, b'N', I, J, 1.0, n.aux, I, arg(g, n, 2).v, beta, y)


cdef void _outer(real* u, real* a, real* c, int I, int J) noexcept nogil:
    cdef int i, j
    for j in range(J):
        for i in range(I):
            u[j * I + i] = a[i] * c[j]


cdef void bwd_c311(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* x = arg(g, n, 0)
    cdef int I = x.dim.d[0], J = x.dim.d[1], K = x.dim.d[2]
    cdef int dt = real_dtype(gy)
    cdef real* u = <real*>n.aux + <size_t>I * J
    if i == 3:
        _blas.axpy(dt, I, 1.0, gy, arg(g, n, 3).g)
        return
    if i == 2:      # dz = (x.y)^T dt
        _blas.gemv(dt, b'T', I, J, 1.0, n.aux, I, gy, 1.0, arg(g, n, 2).g)
        return
    _outer(u, gy, <real*>arg(g, n, 2).v, I, J)
    if i == 0:      # dx_ijk += dt_i z_j y_k
        _blas.ger(dt, I * J, K, 1.0, u, arg(g, n, 1).v, x.g, I * J)
    else:           # dy_k += sum_ij x_ijk dt_i z_j
        _blas.gemv(dt, b'T', I * J, K, 1.0, x.v, I * J, u, 1.0, arg(g, n, 1).g)


cdef int OP_C311 = _op("contract3d_1d_1d", _shape_c311, <kfwd_fn>fwd_c311[float], <kfwd_fn>fwd_c311[double],
                       <kbwd_fn>bwd_c311[float], <kbwd_fn>bwd_c311[double])


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

cdef enum:
    INVERSE, LOGDET


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


cdef void _lu(double* a, int m, int* piv) noexcept nogil:
    """In place: P a = L U (L unit lower, both in a, column-major)."""
    cdef int i, j, k, p
    cdef double best, t
    for k in range(m):
        p = k
        best = fabs(a[k + k * m])
        for i in range(k + 1, m):
            if fabs(a[i + k * m]) > best:
                best = fabs(a[i + k * m])
                p = i
        piv[k] = p
        if p != k:
            for j in range(m):
                t = a[k + j * m]
                a[k + j * m] = a[p + j * m]
                a[p + j * m] = t
        if a[k + k * m] == 0:
            continue        # singular: the inverse has inf/nan, logdet is -inf
        t = 1.0 / a[k + k * m]
        for i in range(k + 1, m):
            a[i + k * m] *= t
        for j in range(k + 1, m):
            t = a[k + j * m]
            if t != 0:
                for i in range(k + 1, m):
                    a[i + j * m] -= a[i + k * m] * t


cdef void _lu_inverse(double* lu, int* piv, int m, double* inv) noexcept nogil:
    cdef int c, i, j, k
    cdef double t
    cdef double* col
    for c in range(m):
        col = inv + c * m
        for i in range(m):
            col[i] = 0
        col[c] = 1
        for k in range(m):
            if piv[k] != k:
                t = col[k]
                col[k] = col[piv[k]]
                col[piv[k]] = t
        for j in range(m):
            t = col[j]
            if t != 0:
                for i in range(j + 1, m):
                    col[i] -= lu[i + j * m] * t
        for j in range(m - 1, -1, -1):
            col[j] /= lu[j + j * m]
            t = col[j]
            for i in range(j):
                col[i] -= lu[i + j * m] * t


cdef void _sq_fwd(real* y, real* x, char* aux, int m, int kind) noexcept nogil:
    cdef double* lu = <double*>aux
    cdef double* inv = lu + m * m
    cdef int* piv = <int*>(inv + m * m)
    cdef int i
    cdef double acc = 0
    for i in range(m * m):
        lu[i] = x[i]
    _lu(lu, m, piv)
    if kind == LOGDET:
        for i in range(m):
            acc += log(fabs(lu[i + i * m]))
        y[0] = acc
        return
    _lu_inverse(lu, piv, m, inv)
    for i in range(m * m):
        y[i] = inv[i]


cdef void _logdet_bwd(real* gx, real gy, char* aux, int m) noexcept nogil:
    # d log|det A| / dA = A^-T
    cdef double* lu = <double*>aux
    cdef double* inv = lu + m * m
    cdef int* piv = <int*>(inv + m * m)
    cdef int i, j
    _lu_inverse(lu, piv, m, inv)
    for j in range(m):
        for i in range(m):
            gx[i + j * m] += gy * inv[j + i * m]


cdef void fwd_square(Graph* g, Node* n, real* y) noexcept:
    cdef Node* x = arg(g, n, 0)
    _sq_fwd(y, <real*>x.v, <char*>n.aux, x.dim.d[0], n.ia[0])


cdef void bwd_square(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef Node* x = arg(g, n, 0)
    cdef int m = x.dim.d[0]
    cdef char* tmp = <char*>n.aux + 16 * m * m + (4 * m + 7) // 8 * 8
    if n.ia[0] == LOGDET:
        _logdet_bwd(<real*>x.g, gy[0], <char*>n.aux, m)
        return
    # Y = A^-1: dA -= Y^T G Y^T
    _blas.gemm(real_dtype(gy), b'N', b'T', m, m, m, 1.0, gy, m, n.v, m, 0.0, tmp, m)
    _blas.gemm(real_dtype(gy), b'T', b'N', m, m, m, -1.0, n.v, m, tmp, m, 1.0, x.g, m)


cdef int OP_SQUARE = _op("inverse_logdet", _shape_square, <kfwd_fn>fwd_square[float],
                         <kfwd_fn>fwd_square[double], <kbwd_fn>bwd_square[float], <kbwd_fn>bwd_square[double])
set_labels("inverse_logdet", 0, ("inverse", "logdet"))   # INVERSE, LOGDET


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


cdef void fwd_top(Graph* g, Node* n, real* y) noexcept:
    cdef double v = _blas.dot(real_dtype(y), dim_total(&arg(g, n, 0).dim), arg(g, n, 0).v, arg(g, n, 1).v)
    y[0] = <real>v


cdef void bwd_top(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef double c = gy[0]
    _blas.axpy(real_dtype(gy), dim_total(&arg(g, n, i).dim), c, arg(g, n, 1 - i).v, arg(g, n, i).g)


cdef int OP_TOP = _op("trace_of_product", _shape_top, <kfwd_fn>fwd_top[float], <kfwd_fn>fwd_top[double],
                      <kbwd_fn>bwd_top[float], <kbwd_fn>bwd_top[double])


def trace_of_product(x, y):
    expr_arg(x, "trace_of_product")
    expr_arg(y, "trace_of_product")
    return finish(node2(OP_TOP, x, y))

# ---------------------------------------------------------------- circ_conv, circ_corr (direct O(n^2): vectors are short)

cdef enum:
    CONV, CORR


cdef int _shape_circ(Graph* g, Node* n) except -1:
    cdef Node* u = arg(g, n, 0)
    cdef Node* v = arg(g, n, 1)
    cdef str name = "circ_conv" if n.ia[0] == CONV else "circ_corr"
    if not looks_like_vector(&u.dim) or not looks_like_vector(&v.dim) or u.dim.d[0] != v.dim.d[0]:
        raise ValueError("%s: u and v must be vectors of the same size, got %s" % (name, arg_dims(g, n)))
    _unbatched(g, n, name)
    n.dim = u.dim
    return 0


cdef void _circ(real* y, real* a, real* b, int m, int kind, int acc) noexcept nogil:
    """y (+)= a * b (CONV: y_k = sum_i a_i b_(k-i)) or a * b reversed (CORR: y_k = sum_i a_i b_(i+k))."""
    cdef int i, k, j
    cdef double s
    for k in range(m):
        s = 0
        for i in range(m):
            j = k - i if kind == CONV else i + k
            j = j + m if j < 0 else (j - m if j >= m else j)
            s += a[i] * <double>b[j]
        y[k] = <real>(y[k] + s) if acc else <real>s


cdef void _circ_bwd(real* gx, real* gy, real* u, real* v, int m, int kind, int which) noexcept nogil:
    cdef int i, k, j
    cdef double s
    for i in range(m):
        s = 0
        for k in range(m):
            if kind == CONV:    # du_i = sum_k g_k v_(k-i); dv_i = sum_k g_k u_(k-i)
                j = k - i
            elif which == 0:    # corr: du_i = sum_k g_k v_(i+k)
                j = i + k
            else:               # corr: dv_i = sum_k g_k u_(i-k)
                j = i - k
            j = j + m if j < 0 else (j - m if j >= m else j)
            s += gy[k] * <double>(v[j] if which == 0 else u[j])
        gx[i] += <real>s


cdef void fwd_circ(Graph* g, Node* n, real* y) noexcept:
    cdef int m = dim_size(&n.dim)
    _circ(y, <real*>arg(g, n, 0).v, <real*>arg(g, n, 1).v, m, n.ia[0], 0)


cdef void bwd_circ(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef int m = dim_size(&n.dim)
    _circ_bwd(<real*>arg(g, n, i).g, gy, <real*>arg(g, n, 0).v, <real*>arg(g, n, 1).v, m, n.ia[0], i)


cdef int OP_CIRC = _op("circ_conv_corr", _shape_circ, <kfwd_fn>fwd_circ[float], <kfwd_fn>fwd_circ[double],
                       <kbwd_fn>bwd_circ[float], <kbwd_fn>bwd_circ[double])
set_labels("circ_conv_corr", 0, ("circ_conv", "circ_corr"))   # CONV, CORR


cdef Expression _circular(object u, object v, int kind, str name):
    expr_arg(u, name)
    expr_arg(v, name)
    cdef int nid = node2(OP_CIRC, u, v)
    g_node(nid).ia[0] = kind
    return finish(nid)


def circ_conv(u, v):
    return _circular(u, v, CONV, "circ_conv")


def circ_corr(u, v):
    return _circular(u, v, CORR, "circ_corr")

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


cdef void fwd_kmh(Graph* g, Node* n, real* y) noexcept:
    cdef int j, k, rows = n.dim.d[0]
    cdef real* x = <real*>arg(g, n, 0).v
    for j in range(n.dim.d[1]):
        memcpy(y + <size_t>j * rows, x + <size_t>j * rows, <size_t>rows * sizeof(real))
        for k in range(1, n.ia[0]):
            _blas.axpy(real_dtype(y), rows, 1.0, x + <size_t>(j + k) * rows, y + <size_t>j * rows)


cdef void bwd_kmh(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef int j, k, rows = n.dim.d[0]
    cdef real* gx = <real*>arg(g, n, 0).g
    for j in range(n.dim.d[1]):
        for k in range(n.ia[0]):
            _blas.axpy(real_dtype(gy), rows, 1.0, gy + <size_t>j * rows, gx + <size_t>(j + k) * rows)


cdef int OP_KMH = _op("kmh_ngram", _shape_kmh, <kfwd_fn>fwd_kmh[float], <kfwd_fn>fwd_kmh[double],
                      <kbwd_fn>bwd_kmh[float], <kbwd_fn>bwd_kmh[double])


def kmh_ngram(x, n):
    expr_arg(x, "kmh_ngram")
    k = int_arg(n, "kmh_ngram", "n")
    if k < 1 or k > 0x7fffffff:
        raise ValueError("kmh_ngram: n must be a positive integer, got %d" % k)
    cdef int nid = node1(OP_KMH, x)
    g_node(nid).ia[0] = k
    return finish(nid)

# ---------------------------------------------------------------- to_device (this build: CPU only)

cdef int _shape_same(Graph* g, Node* n) except -1:
    n.dim = arg(g, n, 0).dim
    return 0


cdef int OP_TODEV = _op("to_device", _shape_same, <kfwd_fn>fwd_copy[float], <kfwd_fn>fwd_copy[double],
                        <kbwd_fn>bwd_identity[float], <kbwd_fn>bwd_identity[double])


def to_device(e, device_str):
    expr_arg(e, "to_device")
    if not isinstance(device_str, str):
        raise TypeError("to_device: device_str must be a string such as 'CPU', got %r" % (device_str,))
    name = device_str.strip()
    if name.upper().startswith(("GPU", "CUDA")):
        raise ValueError("to_device: this build has no GPU (asked for %r); the only device is 'CPU'"
                         % device_str)
    if name != "CPU":
        raise ValueError("to_device: unknown device %r; the only device in this build is 'CPU'" % device_str)
    return finish(node1(OP_TODEV, e))
