# cython: language_level=3, boundscheck=False, wraparound=False
"""Thin float32/float64 dispatch over scipy's BLAS (sklearn's _cython_blas idea)."""
from scipy.linalg.cython_blas cimport sgemm, dgemm, sgemv, dgemv, sger, dger, saxpy, daxpy, sscal, dscal, sdot, ddot


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
    if dtype == 0:
        sgemv(&ta, &m, &n, &fa, <float*>A, &lda, <float*>x, &one, &fb, <float*>y, &one)
    else:
        dgemv(&ta, &m, &n, &alpha, <double*>A, &lda, <double*>x, &one, &beta, <double*>y, &one)


cdef void ger(int dtype, int m, int n, double alpha, void* x, void* y, void* A, int lda) noexcept nogil:
    """A += alpha x y^T (the weight gradient of a matrix-vector product)."""
    cdef float fa = alpha
    cdef int one = 1
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
