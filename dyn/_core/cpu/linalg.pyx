# cython: language_level=3, boundscheck=False, wraparound=False
"""The linear-algebra family's CPU kernels: colwise_add, the 3-d contractions,
inverse and logdet (LU with partial pivoting, in double), trace_of_product,
circ_conv/circ_corr, kmh_ngram and to_device (their definitions: shape rules,
argument checks and constructors, in dyn/_core/ops/linalg.pyx). Each op:
forward, backward (accumulating), registered in the kernel table.
"""
from libc.math cimport log, fabs
from libc.string cimport memcpy
from dyn._core.core.graph cimport Graph, Node, set_kernels, kfwd_fn, kbwd_fn, DEV_CPU, dim_size, dim_total, arg
from dyn._core.core.types cimport real, real_dtype
from dyn._core.cpu cimport blas as _blas
from dyn._core.ops.util cimport batch_ptr
from dyn._core.ops.linalg cimport (
    LOGDET, CONV, OP_CWA, OP_C31, OP_C311, OP_SQUARE, OP_TOP, OP_CIRC, OP_KMH, OP_TODEV)

# ---------------------------------------------------------------- helpers
# Kernels are fused over `real` (float32/float64): y is the node's value, gy its gradient; the
# kernel table holds both specialisations (set_kernels), so no kernel asks which float type it runs in.


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


set_kernels(OP_CWA, DEV_CPU, <kfwd_fn>fwd_cwa[float], <kfwd_fn>fwd_cwa[double],
            <kbwd_fn>bwd_cwa[float], <kbwd_fn>bwd_cwa[double])

# ---------------------------------------------------------------- contract3d_1d(_bias): z_ij = sum_k x_ijk y_k (+ b_ij)

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


set_kernels(OP_C31, DEV_CPU, <kfwd_fn>fwd_c31[float], <kfwd_fn>fwd_c31[double],
            <kbwd_fn>bwd_c31[float], <kbwd_fn>bwd_c31[double])

# ---------------------------------------------------------------- contract3d_1d_1d(_bias): t_i = sum_jk x_ijk y_k z_j (+ b_i)

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


set_kernels(OP_C311, DEV_CPU, <kfwd_fn>fwd_c311[float], <kfwd_fn>fwd_c311[double],
            <kbwd_fn>bwd_c311[float], <kbwd_fn>bwd_c311[double])

# ---------------------------------------------------------------- inverse, logdet (LU with partial pivoting, in double)
# aux (bytes): LU n*n doubles | inverse n*n doubles | pivots n ints (8-aligned) | n*n items (backward scratch)

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


set_kernels(OP_SQUARE, DEV_CPU, <kfwd_fn>fwd_square[float], <kfwd_fn>fwd_square[double],
            <kbwd_fn>bwd_square[float], <kbwd_fn>bwd_square[double])

# ---------------------------------------------------------------- trace_of_product: tr(x y^T) = sum_ij x_ij y_ij

cdef void fwd_top(Graph* g, Node* n, real* y) noexcept:
    cdef double v = _blas.dot(real_dtype(y), dim_total(&arg(g, n, 0).dim), arg(g, n, 0).v, arg(g, n, 1).v)
    y[0] = <real>v


cdef void bwd_top(Graph* g, Node* n, int i, real* gy) noexcept:
    cdef double c = gy[0]
    _blas.axpy(real_dtype(gy), dim_total(&arg(g, n, i).dim), c, arg(g, n, 1 - i).v, arg(g, n, i).g)


set_kernels(OP_TOP, DEV_CPU, <kfwd_fn>fwd_top[float], <kfwd_fn>fwd_top[double],
            <kbwd_fn>bwd_top[float], <kbwd_fn>bwd_top[double])

# ---------------------------------------------------------------- circ_conv, circ_corr (direct O(n^2): vectors are short)

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


set_kernels(OP_CIRC, DEV_CPU, <kfwd_fn>fwd_circ[float], <kfwd_fn>fwd_circ[double],
            <kbwd_fn>bwd_circ[float], <kbwd_fn>bwd_circ[double])

# ---------------------------------------------------------------- kmh_ngram: column j = sum of columns j..j+n-1

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


set_kernels(OP_KMH, DEV_CPU, <kfwd_fn>fwd_kmh[float], <kfwd_fn>fwd_kmh[double],
            <kbwd_fn>bwd_kmh[float], <kbwd_fn>bwd_kmh[double])

# ---------------------------------------------------------------- to_device (this build: CPU only)

set_kernels(OP_TODEV, DEV_CPU, <kfwd_fn>fwd_copy[float], <kfwd_fn>fwd_copy[double],
            <kbwd_fn>bwd_identity[float], <kbwd_fn>bwd_identity[double])
