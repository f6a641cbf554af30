/* float32 matrix products with one small side, for dyn/_core/cpu/blas.pyx.
 *
 * A softmax over a vocabulary at minibatch 1 multiplies a 10k x 256 matrix
 * by the 20-odd outputs of one sentence: C = W H (forward) and C = W^T D
 * (backward to the hidden states). A general BLAS packs the whole large
 * matrix into blocks for every such call, and its kernel, made for square
 * shapes, then runs at a third to a half of the core's peak. The kernels
 * here read the large matrix once, in place, with the small one held in
 * cache; they are register-blocked so that every load feeds several fused
 * multiply-adds. Compiled per instruction set (AVX-512, AVX2 with FMA,
 * baseline) like dyn's other loops; the loader picks the best the machine
 * has. Column-major storage, as BLAS's. The sums run in another order than
 * BLAS's, so results agree with it to float rounding, not bit for bit.
 *
 * dyn_sgemm_nn: C = alpha A B + beta C, A m x k (m large), B k x n (n small).
 * dyn_sgemm_tn: C = alpha A^T B + beta C, A k x m, B k x n (k large, n small).
 * dyn_sgemm_nt: C = alpha A B^T + beta C, A m x k, B n x k (k small).
 * dyn_add_transposed: C = beta C + T^T (the end of a product computed transposed, or a copy of
 * an operand transposed).
 * As in BLAS, beta = 0 writes C without reading it. */
#ifndef DYN_SKINNYGEMM_H
#define DYN_SKINNYGEMM_H

#include <stdlib.h> /* realloc: dyn_sgemm_nt_tall's buffer */
#include <string.h>
#include "_clones.h"
#define DYN_CLONES_SK DYN_TARGET_CLONES

/* sixteen floats: one AVX-512 register, two AVX2 ones, four SSE ones. The
 * helpers taking and returning them are always inlined, so the note GCC gives
 * on their calling convention without AVX-512 concerns no real call (GCC
 * gives it where the clones are made, at the end of the including file, so
 * the note stays off from here on). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
typedef float dyn_v16 __attribute__((vector_size(64)));
typedef float dyn_v16u __attribute__((vector_size(64), aligned(4)));
#define DYN_SK_INLINE static inline __attribute__((always_inline))

/* Whether this machine has AVX-512 (sixteen-float registers, 32 of them). The
 * kernels here hold up to 24 sixteen-float accumulators; with AVX2 each is two
 * of its 16 registers, so they spill on every step and run 3-15x slower than
 * OpenBLAS (measured on an AMD EPYC, Zen 3). blas.pyx uses them only where
 * this says yes. */
static inline int dyn_wide_vectors(void) {
#if defined(__GNUC__) && defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
#else
    return 0;
#endif
}

/* Whether this is an AMD processor: where dyn_sgemm_nt_tall was measured against OpenBLAS (an
 * EPYC of the Zen 4 generation); blas.pyx routes products to it only there. */
static inline int dyn_cpu_amd(void) {
#if defined(__GNUC__) && defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_is("amd") != 0;
#else
    return 0;
#endif
}

DYN_SK_INLINE dyn_v16 dyn_sk_ld(const float* p) { return *(const dyn_v16u*)p; }
DYN_SK_INLINE void dyn_sk_st(float* p, dyn_v16 x) { *(dyn_v16u*)p = x; }
DYN_SK_INLINE float dyn_sk_hsum(dyn_v16 x) {
    float s = 0;
    for (int i = 0; i < 16; i++) s += x[i];
    return s;
}
DYN_SK_INLINE void dyn_sk_out(float* c, float s, float alpha, float beta) {
    *c = beta != 0 ? alpha * s + beta * *c : alpha * s;
}

/* ---------------------------------------------------------------- C = A^T B
 * An NI x NJ block of C from columns of A and B (dot products along k): NI * NJ
 * vector accumulators, NI + NJ loads feed NI * NJ multiply-adds. The inner
 * dimension runs in chunks of DYN_SK_PC, so that the NI columns' chunk of A
 * stays in the first-level cache while every column block of B passes over it;
 * the accumulators are kept between chunks in acc (a small buffer, also in
 * that cache). */
#define DYN_SK_PC 1024

DYN_SK_INLINE void dyn_sk_tn_chunk(int NI, int NJ, int p0, int p1, const float* A, int lda,
                                   const float* B, int ldb, dyn_v16* acc) {
    dyn_v16 s[4][5];
    for (int a = 0; a < NI; a++)
        for (int b = 0; b < NJ; b++) s[a][b] = acc[a * 5 + b];
    for (int p = p0; p < p1; p += 16) {
        dyn_v16 x[4], y[5];
        for (int a = 0; a < NI; a++) x[a] = dyn_sk_ld(A + (long)a * lda + p);
        for (int b = 0; b < NJ; b++) y[b] = dyn_sk_ld(B + (long)b * ldb + p);
        for (int a = 0; a < NI; a++)
            for (int b = 0; b < NJ; b++) s[a][b] += x[a] * y[b];
    }
    for (int a = 0; a < NI; a++)
        for (int b = 0; b < NJ; b++) acc[a * 5 + b] = s[a][b];
}

#define DYN_SK_TN_CASES(NI)                                                              \
    switch (nj) {                                                                        \
    case 5: dyn_sk_tn_chunk(NI, 5, p0, p1, a, lda, b, ldb, acc); break;                  \
    case 4: dyn_sk_tn_chunk(NI, 4, p0, p1, a, lda, b, ldb, acc); break;                  \
    case 3: dyn_sk_tn_chunk(NI, 3, p0, p1, a, lda, b, ldb, acc); break;                  \
    case 2: dyn_sk_tn_chunk(NI, 2, p0, p1, a, lda, b, ldb, acc); break;                  \
    default: dyn_sk_tn_chunk(NI, 1, p0, p1, a, lda, b, ldb, acc); break;                 \
    }

/* column blocks of at most 5 (C = A^T B) or 6 (C = A B) over n columns, as even
 * as they come: 7 columns as 4 + 3, not 6 + 1 (a block of one column feeds
 * too few multiply-adds per load) */
DYN_SK_INLINE int dyn_sk_split(int n, int w, int* start) {
    int nb = (n + w - 1) / w;
    for (int q = 0; q <= nb; q++) start[q] = (int)((long)n * q / nb);
    return nb;
}

#define DYN_SK_GROUP 6   /* column blocks whose accumulators are kept at once */

DYN_CLONES_SK static void dyn_sgemm_tn(int m, int n, int k, float alpha, const float* A, int lda,
                                       const float* B, int ldb, float beta, float* C, int ldc) {
    dyn_v16 accs[DYN_SK_GROUP][20];
    int start[DYN_SK_GROUP * 5 + 1];
    int kv = k / 16 * 16;   /* the rest of k is summed in scalars */
    for (int j0 = 0; j0 < n; j0 += DYN_SK_GROUP * 5) {
        int ng = n - j0 < DYN_SK_GROUP * 5 ? n - j0 : DYN_SK_GROUP * 5;
        int nb = dyn_sk_split(ng, 5, start);
        for (int i = 0; i < m; i += 4) {
            int ni = m - i < 4 ? m - i : 4;
            const float* a = A + (long)i * lda;
            for (int q = 0; q < nb; q++)
                for (int e = 0; e < 20; e++) accs[q][e] = (dyn_v16){0};
            for (int p0 = 0; p0 < kv; p0 += DYN_SK_PC) {
                int p1 = kv - p0 < DYN_SK_PC ? kv : p0 + DYN_SK_PC;
                for (int q = 0; q < nb; q++) {
                    int nj = start[q + 1] - start[q];
                    const float* b = B + (long)(j0 + start[q]) * ldb;
                    dyn_v16* acc = accs[q];
                    switch (ni) {
                    case 4: DYN_SK_TN_CASES(4) break;
                    case 3: DYN_SK_TN_CASES(3) break;
                    case 2: DYN_SK_TN_CASES(2) break;
                    default: DYN_SK_TN_CASES(1) break;
                    }
                }
            }
            for (int q = 0; q < nb; q++)
                for (int b = start[q]; b < start[q + 1]; b++)
                    for (int x = 0; x < ni; x++) {
                        const float* ax = a + (long)x * lda;
                        const float* by = B + (long)(j0 + b) * ldb;
                        float s = dyn_sk_hsum(accs[q][x * 5 + (b - start[q])]);
                        for (int p = kv; p < k; p++) s += ax[p] * by[p];
                        dyn_sk_out(C + i + x + (long)(j0 + b) * ldc, s, alpha, beta);
                    }
        }
    }
}

/* ---------------------------------------------------------------- C = A B, C = A B^T
 * NR x 16 rows by NJ columns of C: per step of the inner dimension, NR vector
 * loads of A's column and NJ broadcasts of B's entries feed NR * NJ
 * multiply-adds. B's entry (p, j) is at B[p rb + j cb]: rb = 1, cb = ldb for
 * B, rb = ldb, cb = 1 for B^T (a broadcast reads one float either way). The
 * lines of the next row block's panel, pf (lines lo..hi of its NR, 0 for
 * none), are fetched ahead: A's columns lie lda apart, too far apart for the
 * hardware's stream prefetchers. With a bias (its entries for these rows; 0:
 * none), C = alpha A B + bias, the bias added to every column as C's entry
 * would be with beta = 1: the sum is rounded the same way. */
DYN_SK_INLINE void dyn_sk_nn_block(int NR, int NJ, int k, const float* A, int lda, const float* B,
                                   long rb, long cb, float* C, int ldc, float alpha, float beta,
                                   const float* bias, const float* pf, int lo, int hi) {
    dyn_v16 acc[8][6];   /* (NR up to 8: _fewgemm.h's 128-row blocks) */
    for (int a = 0; a < NR; a++)
        for (int b = 0; b < NJ; b++) acc[a][b] = (dyn_v16){0};
    for (int p = 0; p < k; p++) {
        const float* ap = A + (long)p * lda;
        if (pf)
            for (int l = lo; l < hi; l++) __builtin_prefetch(pf + (long)p * lda + 16 * l, 0, 3);
        dyn_v16 x[8];
        for (int a = 0; a < NR; a++) x[a] = dyn_sk_ld(ap + 16 * a);
        for (int b = 0; b < NJ; b++) {
            float yb = B[p * rb + b * cb];
            for (int a = 0; a < NR; a++) acc[a][b] += x[a] * yb;
        }
    }
    for (int b = 0; b < NJ; b++)
        for (int a = 0; a < NR; a++) {
            float* c = C + 16 * a + (long)b * ldc;
            dyn_v16 r = acc[a][b] * alpha;
            if (beta != 0) r += dyn_sk_ld(c) * beta;
            if (bias) r += dyn_sk_ld(bias + 16 * a);
            dyn_sk_st(c, r);
        }
}

#define DYN_SK_NN_CASES_LDA(NR, LDA)                                                                \
    switch (nj) {                                                                                   \
    case 6: dyn_sk_nn_block(NR, 6, k, a, LDA, b, rb, cb, c, ldc, alpha, beta, bi, pf, lo, hi); break; \
    case 5: dyn_sk_nn_block(NR, 5, k, a, LDA, b, rb, cb, c, ldc, alpha, beta, bi, pf, lo, hi); break; \
    case 4: dyn_sk_nn_block(NR, 4, k, a, LDA, b, rb, cb, c, ldc, alpha, beta, bi, pf, lo, hi); break; \
    case 3: dyn_sk_nn_block(NR, 3, k, a, LDA, b, rb, cb, c, ldc, alpha, beta, bi, pf, lo, hi); break; \
    case 2: dyn_sk_nn_block(NR, 2, k, a, LDA, b, rb, cb, c, ldc, alpha, beta, bi, pf, lo, hi); break; \
    default: dyn_sk_nn_block(NR, 1, k, a, LDA, b, rb, cb, c, ldc, alpha, beta, bi, pf, lo, hi); break; \
    }
#define DYN_SK_NN_CASES(NR) DYN_SK_NN_CASES_LDA(NR, lda)

/* The row panels of A are fetched `ahead` panels ahead (1 or 2): the lines of the panel that
 * many on are shared out among the column blocks of the current one. bias: see dyn_sk_nn_block
 * (m entries, or 0). */
DYN_SK_INLINE void dyn_sgemm_nn_cols(int m, int n, int k, float alpha, const float* A, int lda,
                                     const float* B, long rb, long cb, float beta, float* C, int ldc,
                                     int* start, int ahead, const float* bias) {
    int nb = dyn_sk_split(n, 6, start);   /* the fetched panel's 4 lines are shared out among the blocks */
    int i = 0;
    for (; i + 64 <= m; i += 64) {
        const float* a = A + i;
        int next = i + 64 * ahead + 64 <= m;
        for (int q = 0; q < nb; q++) {
            int j = start[q], nj = start[q + 1] - j;
            const float* b = B + j * cb;
            float* c = C + i + (long)j * ldc;
            int lo = q * 4 / nb, hi = (q + 1) * 4 / nb;
            const float* pf = next && hi > lo ? a + 64 * ahead : 0;
            const float* bi = bias ? bias + i : 0;
            DYN_SK_NN_CASES(4)
        }
    }
    for (; i + 16 <= m; i += 16) {
        const float* a = A + i;
        const float* pf = 0;
        int lo = 0, hi = 0;
        for (int q = 0; q < nb; q++) {
            int j = start[q], nj = start[q + 1] - j;
            const float* b = B + j * cb;
            float* c = C + i + (long)j * ldc;
            const float* bi = bias ? bias + i : 0;
            DYN_SK_NN_CASES(1)
        }
    }
    for (; i < m; i++)
        for (int j = 0; j < n; j++) {
            float s = 0;
            for (int p = 0; p < k; p++) s += A[i + (long)p * lda] * B[p * rb + j * cb];
            if (bias)
                C[i + (long)j * ldc] = alpha * s + bias[i];
            else
                dyn_sk_out(C + i + (long)j * ldc, s, alpha, beta);
        }
}

DYN_SK_INLINE void dyn_sgemm_nx(int m, int n, int k, float alpha, const float* A, int lda,
                                const float* B, long rb, long cb, float beta, float* C, int ldc,
                                int ahead, const float* bias) {
    int start[64];
    for (int j0 = 0; j0 < n; j0 += 60) {   /* columns in groups of 60, blocks of at most 6 */
        int ng = n - j0 < 60 ? n - j0 : 60;
        dyn_sgemm_nn_cols(m, ng, k, alpha, A, lda, B + j0 * cb, rb, cb, beta, C + (long)j0 * ldc, ldc,
                          start, ahead, bias);
    }
}

/* Whether dyn_sgemm_nn fetches A's row panels two ahead instead of one: 0 never, 1 at 8
 * columns and more (blas.pyx sets it on AMD processors), 2 always (measurements). On an EPYC of
 * the Zen 4 generation, with a 10,000 x 256 A flushed from the caches (a softmax's weights, as a
 * training step finds them), two ahead ran 1.03-1.12x as fast at 8-64 columns (1.09-1.11x at 22,
 * a sentence's words) and 0.92-0.95x at 2; with a 1,024 x 256 A in the caches, level at 8
 * columns and more (bench/gemm_shapes.py --prefetch). */
static int dyn_sk_nn_far = 0;

/* Panels ahead that dyn_sgemm_nn and dyn_sgemm_nn_bias fetch A's rows over n columns. */
DYN_SK_INLINE int dyn_sk_nn_ahead(int n) { return dyn_sk_nn_far == 2 || (dyn_sk_nn_far && n >= 8) ? 2 : 1; }

DYN_CLONES_SK static void dyn_sgemm_nn(int m, int n, int k, float alpha, const float* A, int lda,
                                       const float* B, int ldb, float beta, float* C, int ldc) {
    dyn_sgemm_nx(m, n, k, alpha, A, lda, B, 1, ldb, beta, C, ldc, dyn_sk_nn_ahead(n), 0);
}

/* C = A B + bias 1^T (bias: m entries, added to every column): an affine transform's forward
 * without first copying the bias into every column of C and reading it back (the RNN LM's
 * softmax scores: 10,000 x 22 floats a sentence). The values are those of copying the bias and
 * then dyn_sgemm_nn with beta = 1. */
DYN_CLONES_SK static void dyn_sgemm_nn_bias(int m, int n, int k, const float* A, int lda,
                                            const float* B, int ldb, const float* bias, float* C,
                                            int ldc) {
    dyn_sgemm_nx(m, n, k, 1.0f, A, lda, B, 1, ldb, 0.0f, C, ldc, dyn_sk_nn_ahead(n), bias);
}

/* C = alpha A B^T + beta C, A m x k, B n x k: a weight's gradient from a batch
 * of k columns (k small), C large */
DYN_CLONES_SK static void dyn_sgemm_nt(int m, int n, int k, float alpha, const float* A, int lda,
                                       const float* B, int ldb, float beta, float* C, int ldc) {
    dyn_sgemm_nx(m, n, k, alpha, A, lda, B, ldb, 1, beta, C, ldc, 1, 0);
}

/* C = alpha A B^T + beta C for a C of thousands of rows and hundreds of columns
 * over a short k: a softmax's weight gradient G H^T over one sentence (10,000 x
 * 256 over 22 words). dyn_sgemm_nt keeps a 64-row panel of A in L1 and walks
 * across C's columns before moving down, so C, too large for the caches, is
 * reached through as many streams as it has columns at once. Here A's 64-row
 * panels are first copied, one after another (k x 64 floats each), into a
 * buffer of the calling thread, grown as needed; C is then swept six columns
 * at a time from top to bottom (six sequential streams for the prefetchers)
 * against the buffer, read in order. The rows past the last whole panel go
 * through dyn_sgemm_nx. Returns -1 (nothing done) when the buffer cannot be
 * had. */
static int dyn_sk_nt_ahead = 1;   /* panels ahead that C's lines are fetched (0: none; blas._set_nt_tall_ahead) */
static __thread float* dyn_sk_nt_buf = NULL;
static __thread long dyn_sk_nt_cap = 0;

/* The np = m / 64 whole 64-row panels of A (m x k, ld lda) copied one after another (k x 64
 * floats each, column after column) into the calling thread's buffer, grown as needed; NULL
 * when it cannot be had. */
DYN_SK_INLINE float* dyn_sk_nt_panels(int m, int k, const float* A, int lda) {
    int np = m / 64;
    long need = (long)np * k * 64;
    if (need > dyn_sk_nt_cap || dyn_sk_nt_buf == NULL) {   /* (a first product with no whole panel too) */
        float* q = (float*)realloc(dyn_sk_nt_buf, sizeof(float) * (size_t)need + 64);
        if (q == NULL) return NULL;
        dyn_sk_nt_buf = q;
        dyn_sk_nt_cap = need;
    }
    float* P = dyn_sk_nt_buf;
    for (int i = 0; i < np; i++)
        for (int p = 0; p < k; p++)
            memcpy(P + ((long)i * k + p) * 64, A + (long)i * 64 + (long)p * lda, 64 * sizeof(float));
    return P;
}

DYN_CLONES_SK static int dyn_sgemm_nt_tall(int m, int n, int k, float alpha, const float* A, int lda,
                                           const float* B, int ldb, float beta, float* C, int ldc) {
    int np = m / 64, mt = np * 64;
    float* P = dyn_sk_nt_panels(m, k, A, lda);
    if (P == NULL) return -1;
    int ahead = dyn_sk_nt_ahead;
    for (int j = 0; j < n; j += 6) {
        int nj = n - j < 6 ? n - j : 6;
        const float* b = B + j;        /* B^T's entry (p, j + c) is B[j + c + p ldb]: rb = ldb, cb = 1 */
        long rb = ldb, cb = 1;
        const float* pf = 0;
        const float* bi = 0;
        int lo = 0, hi = 0;
        for (int i = 0; i < np; i++) {
            const float* a = P + (long)i * k * 64;
            float* c = C + (long)i * 64 + (long)j * ldc;
            if (ahead && i + ahead < np)   /* C's lines for the panel `ahead` panels on */
                for (int q = 0; q < nj; q++)
                    for (int l = 0; l < 4; l++)
                        __builtin_prefetch(c + 64L * ahead + (long)q * ldc + 16 * l, 1, 3);
            DYN_SK_NN_CASES_LDA(4, 64)
        }
    }
    if (mt < m)
        dyn_sgemm_nx(m - mt, n, k, alpha, A + mt, lda, B, ldb, 1, beta, C + mt, ldc, 1, 0);
    return 0;
}

/* C (m x n, ld ldc) = beta C + T^T for T n x m (ld ldt): the last step of a
 * product computed transposed (blas.pyx), and with beta = 0 a plain transpose
 * (an LSTM's Wh^T, rnn.pyx; B^T for a narrow A B^T, blas.pyx). In 32 x 32 tiles, so that both matrices are read
 * along their columns a cache line at a time; within a tile, 8 x 8 blocks are
 * transposed in registers (three rounds of shuffles), so that every load and
 * store moves eight floats instead of one. */
typedef float dyn_v8 __attribute__((vector_size(32)));
typedef float dyn_v8u __attribute__((vector_size(32), aligned(4)));
typedef int dyn_i8 __attribute__((vector_size(32)));

DYN_SK_INLINE void dyn_tr8(const float* t, long n, float* c, long ldc, float beta) {
    dyn_v8 r[8], u[8], x;
    for (int a = 0; a < 8; a++) r[a] = *(const dyn_v8u*)(t + a * n);
    for (int a = 0; a < 8; a += 2) {    /* pairs of rows interleaved */
        u[a] = __builtin_shuffle(r[a], r[a + 1], (dyn_i8){0, 8, 1, 9, 4, 12, 5, 13});
        u[a + 1] = __builtin_shuffle(r[a], r[a + 1], (dyn_i8){2, 10, 3, 11, 6, 14, 7, 15});
    }
    for (int a = 0; a < 8; a += 4) {    /* then pairs of pairs: four rows per 128-bit half */
        r[a] = __builtin_shuffle(u[a], u[a + 2], (dyn_i8){0, 1, 8, 9, 4, 5, 12, 13});
        r[a + 1] = __builtin_shuffle(u[a], u[a + 2], (dyn_i8){2, 3, 10, 11, 6, 7, 14, 15});
        r[a + 2] = __builtin_shuffle(u[a + 1], u[a + 3], (dyn_i8){0, 1, 8, 9, 4, 5, 12, 13});
        r[a + 3] = __builtin_shuffle(u[a + 1], u[a + 3], (dyn_i8){2, 3, 10, 11, 6, 7, 14, 15});
    }
    for (int b = 0; b < 4; b++) {       /* the halves joined: column b and column b + 4 */
        for (int h = 0; h < 2; h++) {
            x = h == 0 ? __builtin_shuffle(r[b], r[b + 4], (dyn_i8){0, 1, 2, 3, 8, 9, 10, 11})
                       : __builtin_shuffle(r[b], r[b + 4], (dyn_i8){4, 5, 6, 7, 12, 13, 14, 15});
            dyn_v8u* o = (dyn_v8u*)(c + (b + 4 * h) * ldc);
            if (beta == 0)
                *o = x;
            else if (beta == 1)
                *o = *o + x;
            else
                *o = beta * *o + x;
        }
    }
}

DYN_CLONES_SK static void dyn_add_transposed(int m, int n, const float* restrict T, int ldt, float beta,
                                             float* restrict C, int ldc) {
    for (int j0 = 0; j0 < n; j0 += 32) {
        int j1 = j0 + 32 < n ? j0 + 32 : n;
        int j8 = j0 + (j1 - j0) / 8 * 8;
        for (int i0 = 0; i0 < m; i0 += 32) {
            int i1 = i0 + 32 < m ? i0 + 32 : m;
            int i8 = i0 + (i1 - i0) / 8 * 8;
            for (int j = j0; j < j8; j += 8)
                for (int i = i0; i < i8; i += 8)
                    dyn_tr8(T + j + (long)i * ldt, ldt, C + i + (long)j * ldc, ldc, beta);
            for (int j = j0; j < j1; j++) {     /* the tile's edges past its 8 x 8 blocks */
                float* c = C + (long)j * ldc;
                const float* t = T + j;
                int lo = j < j8 ? i8 : i0;
                if (beta == 0)
                    for (int i = lo; i < i1; i++) c[i] = t[(long)i * ldt];
                else if (beta == 1)
                    for (int i = lo; i < i1; i++) c[i] += t[(long)i * ldt];
                else
                    for (int i = lo; i < i1; i++) c[i] = beta * c[i] + t[(long)i * ldt];
            }
        }
    }
}

/* sum x[i] y[i] in double over float32 vectors (a gradient's squared norm,
 * trace_of_product): the products and the sum in double, as a serial loop
 * would, but in vector lanes summed at the end, so that the loop runs at the
 * memory's speed instead of one add's latency per element. */
DYN_CLONES_SK static double dyn_dot_f32d(long n, const float* restrict x, const float* restrict y) {
    double s = 0.0;
#pragma omp simd reduction(+:s)
    for (long i = 0; i < n; i++) s += (double)x[i] * (double)y[i];
    return s;
}

#endif
