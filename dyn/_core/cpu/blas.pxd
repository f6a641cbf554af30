# BLAS for both float types, through scipy.linalg.cython_blas (no link flags).
# dtype: 0 float32, 1 float64. Column-major, as BLAS and DyNet.
# whether dyn's register kernels are in use (AVX-512 machines; blas._set_skinny switches them)
cdef bint skinny_on() noexcept nogil
cdef void gemm(int dtype, char ta, char tb, int m, int n, int k, double alpha,
               void* A, int lda, void* B, int ldb, double beta, void* C, int ldc) noexcept nogil
# float32 C = A B + bias 1^T in one pass where gemm takes dyn's A B kernel; False (C untouched) elsewhere
cdef bint sgemm_bias(int m, int n, int k, float* A, int lda, float* B, int ldb, float* bias, float* C,
                     int ldc) noexcept nogil
cdef void gemv(int dtype, char ta, int m, int n, double alpha, void* A, int lda,
               void* x, double beta, void* y) noexcept nogil
cdef void ger(int dtype, int m, int n, double alpha, void* x, void* y, void* A, int lda) noexcept nogil
cdef void axpy(int dtype, int n, double alpha, void* x, void* y) noexcept nogil
cdef void vadd(int dtype, long n, void* x, void* y) noexcept nogil
cdef void scal(int dtype, int n, double alpha, void* x) noexcept nogil
cdef double dot(int dtype, int n, void* x, void* y) noexcept nogil
cdef double nrm2sq(int dtype, int n, void* x) noexcept nogil
cdef void matmul_cols(int dtype, char ta, int m, int nb, int k, void* A, int lda, void* X, double beta,
                      void* Y) noexcept nogil
cdef void outer_acc(int dtype, int m, int k, int nb, void* D, void* X, void* G) noexcept nogil
# A weight's gradient held back as a product (dyn/_core/core/graph.pyx, "Low-rank gradients"): whether
# gemm's C += A B^T of a gradient known zero is held back, and Adam with that gradient computed block
# by block (_lowrankadam.h; False when it cannot run)
cdef bint lowrank_held(int m, int n, int k) noexcept nogil
cdef bint adam_lowrank(int m, int n, int k, const float* A, int lda, const float* B, int ldb, float* C,
                       float* w, float* mo, float* v, float gs, float l2, float c1, float c2, float alpha,
                       float eps, float d) noexcept nogil
