# cython: language_level=3, boundscheck=False, wraparound=False
"""Thin float32/float64 dispatch over scipy's BLAS (sklearn's _cython_blas idea).

Matrix-vector products and rank-1 updates of small matrices (the per-example
shapes of dynamic graphs: 32x32 ... 64x64) run as plain compiled loops: at
those sizes OpenBLAS's call overhead costs more than the arithmetic
(_smallblas.h).
"""
from scipy.linalg.cython_blas cimport (
    sgemm, dgemm, sgemv, dgemv, sger, dger, saxpy, daxpy, sscal, dscal, sdot, ddot)

cdef extern from "_smallblas.h" nogil:
    void dyn_gemv_n_f32(int m, int n, float alpha, const float* A, int lda, const float* x, float beta, float* y)
    void dyn_gemv_t_f32(int m, int n, float alpha, const float* A, int lda, const float* x, float beta, float* y)
    void dyn_ger_f32(int m, int n, float alpha, const float* x, const float* y, float* A, int lda)
    void dyn_gemv_n_f64(int m, int n, double alpha, const double* A, int lda, const double* x, double beta,
                        double* y)
    void dyn_gemv_t_f64(int m, int n, double alpha, const double* A, int lda, const double* x, double beta,
                        double* y)
    void dyn_ger_f64(int m, int n, double alpha, const double* x, const double* y, double* A, int lda)
    void dyn_vadd_f32(long n, const float* x, float* y)
    void dyn_vadd_f64(long n, const double* x, double* y)

cdef enum:
    SMALL = 64 * 64   # elements of a matrix below which our loops win


cdef void gemm(int dtype, char ta, char tb, int m, int n, int k, double alpha,
               void* A, int lda, void* B, int ldb, double beta, void* C, int ldc) noexcept nogil:
    cdef float fa = alpha, fb = beta
    if m == 0 or n == 0:
        return
    if dtype == 0:
        sgemm(&ta, &tb, &m, &n, &k, &fa, <float*>A, &lda, <float*>B, &ldb, &fb, <float*>C, &ldc)
    else:
        dgemm(&ta, &tb, &m, &n, &k, &alpha, <double*>A, &lda, <double*>B, &ldb, &beta, <double*>C, &ldc)


cdef void gemv(int dtype, char ta, int m, int n, double alpha, void* A, int lda,
               void* x, double beta, void* y) noexcept nogil:
    cdef float fa = alpha, fb = beta
    cdef int one = 1
    if <long>m * n <= SMALL:
        if dtype == 0:
            if ta == b'N':
                dyn_gemv_n_f32(m, n, fa, <float*>A, lda, <float*>x, fb, <float*>y)
            else:
                dyn_gemv_t_f32(m, n, fa, <float*>A, lda, <float*>x, fb, <float*>y)
        elif ta == b'N':
            dyn_gemv_n_f64(m, n, alpha, <double*>A, lda, <double*>x, beta, <double*>y)
        else:
            dyn_gemv_t_f64(m, n, alpha, <double*>A, lda, <double*>x, beta, <double*>y)
        return
    if dtype == 0:
        sgemv(&ta, &m, &n, &fa, <float*>A, &lda, <float*>x, &one, &fb, <float*>y, &one)
    else:
        dgemv(&ta, &m, &n, &alpha, <double*>A, &lda, <double*>x, &one, &beta, <double*>y, &one)


cdef void ger(int dtype, int m, int n, double alpha, void* x, void* y, void* A, int lda) noexcept nogil:
    """A += alpha x y^T (the weight gradient of a matrix-vector product)."""
    cdef float fa = alpha
    cdef int one = 1
    if <long>m * n <= SMALL:
        if dtype == 0:
            dyn_ger_f32(m, n, fa, <float*>x, <float*>y, <float*>A, lda)
        else:
            dyn_ger_f64(m, n, alpha, <double*>x, <double*>y, <double*>A, lda)
        return
    if dtype == 0:
        sger(&m, &n, &fa, <float*>x, &one, <float*>y, &one, <float*>A, &lda)
    else:
        dger(&m, &n, &alpha, <double*>x, &one, <double*>y, &one, <double*>A, &lda)


cdef void axpy(int dtype, int n, double alpha, void* x, void* y) noexcept nogil:
    cdef float fa = alpha
    cdef int one = 1
    if dtype == 0:
        saxpy(&n, &fa, <float*>x, &one, <float*>y, &one)
    else:
        daxpy(&n, &alpha, <double*>x, &one, <double*>y, &one)


cdef void vadd(int dtype, long n, void* x, void* y) noexcept nogil:
    """y += x for short vectors (a batch element's slice): a compiled loop, no BLAS call."""
    if dtype == 0:
        dyn_vadd_f32(n, <float*>x, <float*>y)
    else:
        dyn_vadd_f64(n, <double*>x, <double*>y)


cdef void scal(int dtype, int n, double alpha, void* x) noexcept nogil:
    cdef float fa = alpha
    cdef int one = 1
    if dtype == 0:
        sscal(&n, &fa, <float*>x, &one)
    else:
        dscal(&n, &alpha, <double*>x, &one)


cdef double dot(int dtype, int n, void* x, void* y) noexcept nogil:
    cdef int i
    cdef double s = 0
    if dtype == 0:
        # accumulate in double: float32 sums of long vectors lose digits
        for i in range(n):
            s += (<float*>x)[i] * <double>(<float*>y)[i]
        return s
    cdef int one = 1
    return ddot(&n, <double*>x, &one, <double*>y, &one)


cdef double nrm2sq(int dtype, int n, void* x) noexcept nogil:
    return dot(dtype, n, x, x)


cdef void matmul_cols(int dtype, char ta, int m, int nb, int k, void* A, int lda, void* X, double beta,
                      void* Y) noexcept nogil:
    """Y (m x nb) = op(A) X + beta Y for X k x nb: a matrix-vector product for
    one column, a matrix product otherwise."""
    if nb == 1:
        if ta == b'N':
            gemv(dtype, b'N', m, k, 1.0, A, lda, X, beta, Y)
        else:
            gemv(dtype, b'T', k, m, 1.0, A, lda, X, beta, Y)
    else:
        gemm(dtype, ta, b'N', m, nb, k, 1.0, A, lda, X, k, beta, Y, m)


cdef void outer_acc(int dtype, int m, int k, int nb, void* D, void* X, void* G) noexcept nogil:
    """G (m x k) += D X^T for D m x nb, X k x nb (sums over the nb columns)."""
    if nb == 1:
        ger(dtype, m, k, 1.0, D, X, G, m)
    else:
        gemm(dtype, b'N', b'T', m, k, nb, 1.0, D, m, X, k, 1.0, G, m)
