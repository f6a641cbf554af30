/* Small-matrix BLAS-2 for dyn: y = A x, y = A^T x, A += x y^T.
 *
 * At per-example sizes (32x32 .. 64x64) a BLAS call costs more than its
 * arithmetic. These loops are compiled once per instruction set (AVX-512,
 * AVX2, baseline) with GCC's target_clones; the loader picks the best the
 * machine has, so a portable build still runs at full vector width. */
#ifndef DYN_SMALLBLAS_H
#define DYN_SMALLBLAS_H

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define DYN_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DYN_CLONES
#endif

#define DYN_SMALLBLAS(T, S)                                                                  \
DYN_CLONES static void dyn_gemv_n_##S(int m, int n, T alpha, const T* restrict A, int lda,     \
                                      const T* restrict x, T beta, T* restrict y) {            \
    if (beta == 0) { for (int i = 0; i < m; i++) y[i] = 0; }                                 \
    else if (beta != 1) { for (int i = 0; i < m; i++) y[i] *= beta; }                        \
    for (int j = 0; j < n; j++) {                                                            \
        const T* a = A + (long)j * lda;                                                      \
        T xj = alpha * x[j];                                                                 \
        for (int i = 0; i < m; i++) y[i] += a[i] * xj;                                       \
    }                                                                                        \
}                                                                                            \
DYN_CLONES static void dyn_gemv_t_##S(int m, int n, T alpha, const T* restrict A, int lda,     \
                                      const T* restrict x, T beta, T* restrict y) {            \
    /* dot products of x with four columns per pass (x loaded once); omp */   \
    /* simd permits the reductions' reassociation (-fopenmp-simd only) */       \
    int j = 0;                                                                               \
    for (; j + 4 <= n; j += 4) {                                                             \
        const T* a0 = A + (long)j * lda;                                                     \
        const T* a1 = a0 + lda;                                                              \
        const T* a2 = a1 + lda;                                                              \
        const T* a3 = a2 + lda;                                                              \
        T s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                                    \
        _Pragma("omp simd reduction(+:s0,s1,s2,s3)")                                         \
        for (int i = 0; i < m; i++) {                                                        \
            T xi = x[i];                                                                     \
            s0 += a0[i] * xi; s1 += a1[i] * xi; s2 += a2[i] * xi; s3 += a3[i] * xi;          \
        }                                                                                    \
        y[j] = alpha * s0 + (beta != 0 ? beta * y[j] : 0);                                   \
        y[j + 1] = alpha * s1 + (beta != 0 ? beta * y[j + 1] : 0);                           \
        y[j + 2] = alpha * s2 + (beta != 0 ? beta * y[j + 2] : 0);                           \
        y[j + 3] = alpha * s3 + (beta != 0 ? beta * y[j + 3] : 0);                           \
    }                                                                                        \
    for (; j < n; j++) {                                                                     \
        const T* a = A + (long)j * lda;                                                      \
        T s = 0;                                                                             \
        _Pragma("omp simd reduction(+:s)")                                                   \
        for (int i = 0; i < m; i++) s += a[i] * x[i];                                        \
        y[j] = alpha * s + (beta != 0 ? beta * y[j] : 0);                                    \
    }                                                                                        \
}                                                                                            \
DYN_CLONES static void dyn_ger_##S(int m, int n, T alpha, const T* restrict x,                 \
                                   const T* restrict y, T* restrict A, int lda) {             \
    for (int j = 0; j < n; j++) {                                                            \
        T* a = A + (long)j * lda;                                                            \
        T yj = alpha * y[j];                                                                 \
        for (int i = 0; i < m; i++) a[i] += x[i] * yj;                                       \
    }                                                                                        \
}                                                                                            \
/* y += x over n elements (the autobatching engine's scatter-add) */                        \
DYN_CLONES static void dyn_vadd_##S(long n, const T* restrict x, T* restrict y) {              \
    for (long i = 0; i < n; i++) y[i] += x[i];                                               \
}

DYN_SMALLBLAS(float, f32)
DYN_SMALLBLAS(double, f64)

#endif
