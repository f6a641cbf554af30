/* Small-matrix BLAS-2 for dyn: y = A x, y = A^T x, A += x y^T.
 *
 * At per-example sizes (32x32 .. 128x128) a BLAS call costs more than its
 * arithmetic. These loops are compiled once per instruction set (AVX-512,
 * AVX2, baseline) with GCC's target_clones; the loader picks the best the
 * machine has, so a portable build still runs at full vector width. */
#ifndef DYN_SMALLBLAS_H
#define DYN_SMALLBLAS_H
#include "_skinnygemm.h"   /* its sixteen-float vector type and helpers */

#include "_clones.h"
#define DYN_CLONES DYN_TARGET_CLONES

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

DYN_SMALLBLAS(float, f32_plain)   /* (float32's gemv below; its ger and vadd are these) */
DYN_SMALLBLAS(double, f64)
#define dyn_ger_f32 dyn_ger_f32_plain
#define dyn_vadd_f32 dyn_vadd_f32_plain

/* float32 y = alpha A x + beta y and y = alpha A^T x + beta y with the vectors in registers
 * (an LSTM step's Wh h_{t-1} and Wh^T d at H = 50: 200 x 50). The plain loops above keep y in
 * memory (A x: every column loads and stores all of y, each store feeding the next column's
 * load) or sum every dot product across one vector's lanes on its own (A^T x); these run
 * 1.5-3x faster from m = 16 on (and as fast as OpenBLAS's or faster up to 2^16 elements), with
 * the same sums in another order. */
typedef int dyn_sb_i16 __attribute__((vector_size(64)));   /* shuffle masks of dyn_v16 (_skinnygemm.h) */

/* rows i0 .. i0 + 16 NV of y = alpha A x + beta y, in NV vector accumulators */
DYN_SK_INLINE dyn_v16 dyn_sb_n_start(const float* y, float beta) {
    dyn_v16 z = {0};
    return beta == 0 ? z : beta == 1 ? dyn_sk_ld(y) : beta * dyn_sk_ld(y);
}
DYN_SK_INLINE void dyn_sb_n_rows(int NV, int i0, int n, float alpha, const float* A, int lda,
                                 const float* x, float beta, float* y) {
    dyn_v16 acc[8];
    for (int v = 0; v < NV; v++) acc[v] = dyn_sb_n_start(y + i0 + 16 * v, beta);
    for (int j = 0; j < n; j++) {
        const float* a = A + (long)j * lda + i0;
        float xj = alpha * x[j];
        for (int v = 0; v < NV; v++) acc[v] += dyn_sk_ld(a + 16 * v) * xj;
    }
    for (int v = 0; v < NV; v++) dyn_sk_st(y + i0 + 16 * v, acc[v]);
}

DYN_CLONES static void dyn_gemv_n_f32(int m, int n, float alpha, const float* restrict A, int lda,
                                      const float* restrict x, float beta, float* restrict y) {
    if (m < 16) {
        dyn_gemv_n_f32_plain(m, n, alpha, A, lda, x, beta, y);
        return;
    }
    /* the last 16 rows first when m is no multiple of 16: computed from y as it was, stored
     * last over rows the blocks also computed (with the same sums in the same order) */
    int mv = m / 16 * 16, tail = m != mv;
    dyn_v16 t = {0};
    if (tail) {
        t = dyn_sb_n_start(y + m - 16, beta);
        for (int j = 0; j < n; j++) t += dyn_sk_ld(A + (long)j * lda + m - 16) * (alpha * x[j]);
    }
    int i0 = 0;
    for (; i0 + 128 <= mv; i0 += 128) dyn_sb_n_rows(8, i0, n, alpha, A, lda, x, beta, y);
    switch ((mv - i0) / 16) {
    case 7: dyn_sb_n_rows(7, i0, n, alpha, A, lda, x, beta, y); break;
    case 6: dyn_sb_n_rows(6, i0, n, alpha, A, lda, x, beta, y); break;
    case 5: dyn_sb_n_rows(5, i0, n, alpha, A, lda, x, beta, y); break;
    case 4: dyn_sb_n_rows(4, i0, n, alpha, A, lda, x, beta, y); break;
    case 3: dyn_sb_n_rows(3, i0, n, alpha, A, lda, x, beta, y); break;
    case 2: dyn_sb_n_rows(2, i0, n, alpha, A, lda, x, beta, y); break;
    case 1: dyn_sb_n_rows(1, i0, n, alpha, A, lda, x, beta, y); break;
    default: break;
    }
    if (tail) dyn_sk_st(y + m - 16, t);
}

/* sixteen vectors' lane sums as one vector (lane k: the sum of s[k]): four rounds that each add
 * pairs of vectors half against half */
DYN_SK_INLINE dyn_v16 dyn_sb_sum16(const dyn_v16* s) {
    dyn_v16 t[8], u[4], w[2];
    for (int p = 0; p < 8; p++)
        t[p] = __builtin_shuffle(s[2 * p], s[2 * p + 1],
                                 (dyn_sb_i16){0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23})
             + __builtin_shuffle(s[2 * p], s[2 * p + 1],
                                 (dyn_sb_i16){8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31});
    for (int p = 0; p < 4; p++)
        u[p] = __builtin_shuffle(t[2 * p], t[2 * p + 1],
                                 (dyn_sb_i16){0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27})
             + __builtin_shuffle(t[2 * p], t[2 * p + 1],
                                 (dyn_sb_i16){4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31});
    for (int p = 0; p < 2; p++)
        w[p] = __builtin_shuffle(u[2 * p], u[2 * p + 1],
                                 (dyn_sb_i16){0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29})
             + __builtin_shuffle(u[2 * p], u[2 * p + 1],
                                 (dyn_sb_i16){2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31});
    return __builtin_shuffle(w[0], w[1],
                             (dyn_sb_i16){0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30})
         + __builtin_shuffle(w[0], w[1],
                             (dyn_sb_i16){1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31});
}

DYN_CLONES static void dyn_gemv_t_f32(int m, int n, float alpha, const float* restrict A, int lda,
                                      const float* restrict x, float beta, float* restrict y) {
    if (m < 16 || n < 16) {
        dyn_gemv_t_f32_plain(m, n, alpha, A, lda, x, beta, y);
        return;
    }
    /* sixteen columns at a time, one accumulator each; the rows past the last multiple of 16
     * as the matrix's last 16 rows times x's last 16 with the rows already summed zeroed */
    int mv = m / 16 * 16, j = 0;
    float xt[16] = {0};
    for (int i = mv; i < m; i++) xt[16 - (m - i)] = x[i];
    dyn_v16 xtail = dyn_sk_ld(xt);
    for (; j + 16 <= n; j += 16) {
        dyn_v16 s[16], r;
        const float* a = A + (long)j * lda;
        for (int c = 0; c < 16; c++) s[c] = (dyn_v16){0};
        for (int i = 0; i < mv; i += 16) {
            dyn_v16 xv = dyn_sk_ld(x + i);
            for (int c = 0; c < 16; c++) s[c] += dyn_sk_ld(a + (long)c * lda + i) * xv;
        }
        if (m != mv)
            for (int c = 0; c < 16; c++) s[c] += dyn_sk_ld(a + (long)c * lda + m - 16) * xtail;
        r = alpha * dyn_sb_sum16(s);
        if (beta != 0) r += beta * dyn_sk_ld(y + j);
        dyn_sk_st(y + j, r);
    }
    if (j < n)
        dyn_gemv_t_f32_plain(m, n - j, alpha, A + (long)j * lda, lda, x, beta, y + j);
}

#endif
