/* float32 products of a matrix with a few columns, for CPUs without AVX-512
 * (dyn/_core/cpu/blas.pyx, its paths 6, 7 and 8).
 *
 * When automatic batching runs a handful of LSTM steps or tree nodes as one,
 * their weight product has a few to a few dozen columns: C = A B with A 256 x 64 (a
 * character LSTM's Wh) or 640 x 256 (a Tree-LSTM's gates), and its backward
 * C = A^T D. OpenBLAS's Haswell kernels pack the whole of A for each such
 * call, which at this width costs more than the product; one matrix-vector
 * product per column reads A once per column. The loops here read A in
 * place, once per group of up to six columns, and hold a tile of C in
 * eight-float accumulators: at least eight independent sums per tile where
 * the shape allows (fewer columns, taller tiles), since a multiply-add waits
 * four cycles for the last one into the same sum, and at most twelve sums
 * (the tile sizes, DYN_NG_NN_NV and DYN_NG_TN_NI, are the fastest measured
 * on an AMD EPYC (Zen 3): tiles of 16 rows by 1-2 columns, two to four sums,
 * had run A B at 20-30 GFLOP/s; the tiles now run it at 63-90 from four columns up).
 * dyn_sgemm_nn_narrow: C = alpha A B + beta C, A m x k, B k x n.
 * dyn_sgemm_tn_narrow: C = alpha A^T B + beta C, A k x m, B k x n.
 * For an A too large for the caches (2^18 elements and more), the same two
 * products with blocks of their own (further down: 15 and 16 registers):
 * dyn_sgemm_nn_panels, and dyn_sgemm_tn_long (k in stretches of kc).
 * Column-major, leading dimensions as BLAS's; beta = 0 writes C without
 * reading it. The sums run in another order than BLAS's: results agree with
 * it to float rounding. */
#ifndef DYN_NARROWGEMM_H
#define DYN_NARROWGEMM_H

#include <stddef.h> /* NULL: the panels pass it for "no prefetch" */

#include "_clones.h"

typedef float dyn_n8 __attribute__((vector_size(32)));
typedef float dyn_n8u __attribute__((vector_size(32), aligned(4)));
#define DYN_NG_INLINE static inline __attribute__((always_inline))

DYN_NG_INLINE dyn_n8 dyn_ng_ld(const float* p) { return *(const dyn_n8u*)p; }
DYN_NG_INLINE void dyn_ng_st(float* p, dyn_n8 x) { *(dyn_n8u*)p = x; }
DYN_NG_INLINE void dyn_ng_out(float* c, dyn_n8 s, float alpha, float beta) {
    dyn_ng_st(c, beta != 0 ? alpha * s + beta * dyn_ng_ld(c) : alpha * s);
}
DYN_NG_INLINE float dyn_ng_hsum(dyn_n8 x) {
    return ((x[0] + x[4]) + (x[1] + x[5])) + ((x[2] + x[6]) + (x[3] + x[7]));
}
DYN_NG_INLINE void dyn_ng_out1(float* c, float s, float alpha, float beta) {
    *c = beta != 0 ? alpha * s + beta * *c : alpha * s;
}

/* ---------------------------------------------------------------- C = A B */

/* The tiles: NV eight-float vectors of C's rows (8 NV rows) times NJ (1-6) of its columns,
 * NV * NJ <= 12 accumulators. Per step along k: NV loads of A's column and NJ broadcasts of B
 * feed NV * NJ multiply-adds. Fewer columns take more rows, so that each tile has at least
 * eight independent sums: a multiply-add waits four cycles for the one before it into the same
 * sum, and two issue per cycle (a tile of 16 rows and one column has two sums: one
 * multiply-add every two cycles at best). pf, where not NULL, is a later panel of A (the
 * panels below): its columns pnext, pnext + pstep, ... are prefetched into L2 on the way. */
DYN_NG_INLINE void dyn_ng_nn_tile(int NV, int NJ, int k, float alpha, const float* A, int lda, const float* B,
                                  int ldb, float beta, float* C, int ldc, const float* pf, int pstep, int pnext) {
    dyn_n8 s[8][6];
    for (int v = 0; v < NV; v++)
        for (int j = 0; j < NJ; j++) s[v][j] = (dyn_n8){0, 0, 0, 0, 0, 0, 0, 0};
    for (int p = 0; p < k; p++) {
        const float* a = A + (long)p * lda;
        dyn_n8 x[8];
        for (int v = 0; v < NV; v++) x[v] = dyn_ng_ld(a + 8 * v);
        if (pf && p == pnext) {
            __builtin_prefetch(pf + (long)p * lda, 0, 2);
            pnext += pstep;
        }
        for (int j = 0; j < NJ; j++) {
            float b = B[p + (long)j * ldb];
            for (int v = 0; v < NV; v++) s[v][j] += x[v] * b;
        }
    }
    for (int j = 0; j < NJ; j++)
        for (int v = 0; v < NV; v++) dyn_ng_out(C + (long)j * ldc + 8 * v, s[v][j], alpha, beta);
}

/* The last r (1-7) rows of C's NJ columns, in a matrix of at least eight rows: the tile of its
 * last eight rows (A and C here point at row m - 8), of which only the last r are written (the
 * others are another tile's, already written: with beta they must not be scaled twice) */
DYN_NG_INLINE void dyn_ng_nn_last(int NJ, int r, int k, float alpha, const float* A, int lda, const float* B,
                                  int ldb, float beta, float* C, int ldc) {
    dyn_n8 s[6];
    for (int j = 0; j < NJ; j++) s[j] = (dyn_n8){0, 0, 0, 0, 0, 0, 0, 0};
    for (int p = 0; p < k; p++) {
        dyn_n8 x = dyn_ng_ld(A + (long)p * lda);
        for (int j = 0; j < NJ; j++) s[j] += x * B[p + (long)j * ldb];
    }
    for (int j = 0; j < NJ; j++)
        for (int e = 8 - r; e < 8; e++) dyn_ng_out1(C + (long)j * ldc + e, s[j][e], alpha, beta);
}

/* The row vectors per tile for NJ columns: 64 rows for one column, 48 for two, 24 for three or
 * four, 16 for five or six */
#define DYN_NG_NN_NV(NJ) ((NJ) == 1 ? 8 : (NJ) == 2 ? 6 : (NJ) <= 4 ? 3 : 2)

/* NJ columns of C: tiles of DYN_NG_NN_NV(NJ) vectors, the rows left in tiles of 4, 2 and 1
 * vectors (no more than the first's), then the last rows (m % 8) by dyn_ng_nn_last, or one by one
 * in a matrix of fewer than eight rows */
DYN_NG_INLINE void dyn_ng_nn_cols(int NJ, int m, int k, float alpha, const float* A, int lda, const float* B,
                                  int ldb, float beta, float* C, int ldc) {
    const int NV = DYN_NG_NN_NV(NJ);
    int i = 0;
    for (; i + 8 * NV <= m; i += 8 * NV)
        dyn_ng_nn_tile(NV, NJ, k, alpha, A + i, lda, B, ldb, beta, C + i, ldc, NULL, 0, 0);
    if (NV > 4 && i + 32 <= m) {
        dyn_ng_nn_tile(4, NJ, k, alpha, A + i, lda, B, ldb, beta, C + i, ldc, NULL, 0, 0);
        i += 32;
    }
    if (NV > 2 && i + 16 <= m) {
        dyn_ng_nn_tile(2, NJ, k, alpha, A + i, lda, B, ldb, beta, C + i, ldc, NULL, 0, 0);
        i += 16;
    }
    if (NV > 1 && i + 8 <= m) {
        dyn_ng_nn_tile(1, NJ, k, alpha, A + i, lda, B, ldb, beta, C + i, ldc, NULL, 0, 0);
        i += 8;
    }
    if (i < m && m >= 8) {
        dyn_ng_nn_last(NJ, m - i, k, alpha, A + m - 8, lda, B, ldb, beta, C + m - 8, ldc);
        return;
    }
    for (; i < m; i++)
        for (int j = 0; j < NJ; j++) {
            float s = 0;
            for (int p = 0; p < k; p++) s += A[i + (long)p * lda] * B[p + (long)j * ldb];
            dyn_ng_out1(C + i + (long)j * ldc, s, alpha, beta);
        }
}

/* B's columns in groups of at most six, as even as can be (7: 4 + 3; 13: 5 + 4 + 4), each
 * group one pass over A: COLS(NJ, ...) with NJ a constant, so that each tile's loops are
 * unrolled over its columns */
#define DYN_NG_BY_GROUPS(COLS)                                                                        \
    int groups = (n + 5) / 6, j = 0;                                                                  \
    for (int g = 0; g < groups; g++) {                                                                \
        int w = (n - j) / (groups - g) + ((n - j) % (groups - g) != 0);                               \
        const float* Bj = B + (long)j * ldb;                                                          \
        float* Cj = C + (long)j * ldc;                                                                \
        switch (w) {                                                                                  \
            case 6: COLS(6, m, k, alpha, A, lda, Bj, ldb, beta, Cj, ldc); break;                      \
            case 5: COLS(5, m, k, alpha, A, lda, Bj, ldb, beta, Cj, ldc); break;                      \
            case 4: COLS(4, m, k, alpha, A, lda, Bj, ldb, beta, Cj, ldc); break;                      \
            case 3: COLS(3, m, k, alpha, A, lda, Bj, ldb, beta, Cj, ldc); break;                      \
            case 2: COLS(2, m, k, alpha, A, lda, Bj, ldb, beta, Cj, ldc); break;                      \
            default: COLS(1, m, k, alpha, A, lda, Bj, ldb, beta, Cj, ldc); break;                     \
        }                                                                                             \
        j += w;                                                                                       \
    }

DYN_NG_INLINE void dyn_ng_nn_by_groups(int m, int n, int k, float alpha, const float* A, int lda, const float* B,
                                       int ldb, float beta, float* C, int ldc) {
    DYN_NG_BY_GROUPS(dyn_ng_nn_cols)
}

DYN_TARGET_CLONES
void dyn_sgemm_nn_narrow(int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                         float beta, float* C, int ldc) {
    dyn_ng_nn_by_groups(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* dyn_sgemm_nn_panels: C = alpha A B + beta C for an A too large for the
 * caches, with a few dozen columns (a 10,000-word softmax's W, 10,000 x 256,
 * times a sentence's hidden states). The loops above sweep the whole of A
 * once per four columns; here each 16-row panel of A (one cache line from
 * each of its k columns) comes from memory once and serves all of B's
 * columns, six at a time, from L1. Its lines lie a column's length apart,
 * which the hardware prefetcher does not follow, so the panel
 * DYN_NG_AHEAD rows on is prefetched into L2 while this one is used, its
 * columns shared out over the column groups (one prefetch per step of one
 * group). Where A's columns lie a multiple of 512 bytes apart the panel's
 * lines share a few of L1's sets and evict each other: past 24 columns (or 8,
 * with columns 16 KB apart or more) blas.pyx keeps such an A with OpenBLAS.
 * Rows past the last sixteen go through the loops above. */
#define DYN_NG_AHEAD 64

DYN_TARGET_CLONES
void dyn_sgemm_nn_panels(int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                         float beta, float* C, int ldc) {
    int groups = (n + 5) / 6, i = 0;
    for (; i + 16 <= m; i += 16) {
        const float* pf = i + DYN_NG_AHEAD + 16 <= m ? A + i + DYN_NG_AHEAD : NULL;
        int j = 0, g = 0;
        for (; j + 6 <= n; j += 6, g++)
            dyn_ng_nn_tile(2, 6, k, alpha, A + i, lda, B + (long)j * ldb, ldb, beta, C + i + (long)j * ldc,
                           ldc, pf, groups, g);
        const float* Bj = B + (long)j * ldb;
        float* Cj = C + i + (long)j * ldc;
        switch (n - j) {
            case 5: dyn_ng_nn_tile(2, 5, k, alpha, A + i, lda, Bj, ldb, beta, Cj, ldc, pf, groups, g); break;
            case 4: dyn_ng_nn_tile(2, 4, k, alpha, A + i, lda, Bj, ldb, beta, Cj, ldc, pf, groups, g); break;
            case 3: dyn_ng_nn_tile(2, 3, k, alpha, A + i, lda, Bj, ldb, beta, Cj, ldc, pf, groups, g); break;
            case 2: dyn_ng_nn_tile(2, 2, k, alpha, A + i, lda, Bj, ldb, beta, Cj, ldc, pf, groups, g); break;
            case 1: dyn_ng_nn_tile(2, 1, k, alpha, A + i, lda, Bj, ldb, beta, Cj, ldc, pf, groups, g); break;
            default: break;
        }
    }
    if (i < m) dyn_ng_nn_by_groups(m - i, n, k, alpha, A + i, lda, B, ldb, beta, C + i, ldc);
}

/* ---------------------------------------------------------------- C = A^T B
 * NI columns of A against NJ columns of B, as dot products along k: per eight steps, NI + NJ
 * loads feed NI * NJ multiply-adds, into NI * NJ <= 12 accumulators (at 3 x 4, twelve
 * accumulators and four loads, all of AVX2's 16 registers). */
DYN_NG_INLINE void dyn_ng_tn_block(int NI, int NJ, int k, float alpha, const float* A, int lda, const float* B,
                                   int ldb, float beta, float* C, int ldc) {
    dyn_n8 s[8][6];
    float t[8][6];
    for (int a = 0; a < NI; a++)
        for (int b = 0; b < NJ; b++) s[a][b] = (dyn_n8){0, 0, 0, 0, 0, 0, 0, 0};
    int p = 0;
    for (; p + 8 <= k; p += 8) {
        dyn_n8 x[8];
        for (int a = 0; a < NI; a++) x[a] = dyn_ng_ld(A + (long)a * lda + p);
        for (int b = 0; b < NJ; b++) {
            dyn_n8 y = dyn_ng_ld(B + (long)b * ldb + p);
            for (int a = 0; a < NI; a++) s[a][b] += x[a] * y;
        }
    }
    for (int a = 0; a < NI; a++)
        for (int b = 0; b < NJ; b++) {
            float r = dyn_ng_hsum(s[a][b]);
            for (int q = p; q < k; q++) r += A[(long)a * lda + q] * B[(long)b * ldb + q];
            t[a][b] = r;
        }
    for (int a = 0; a < NI; a++)
        for (int b = 0; b < NJ; b++) dyn_ng_out1(C + a + (long)b * ldc, t[a][b], alpha, beta);
}

/* A's columns per tile against NJ of B's: as for A B, at least eight sums where the columns
 * allow (eight of A for one of B, five for two, three for three or four, two for five or six),
 * the columns left over (fewer than NI: the tail's other cases are not compiled) in one smaller
 * tile */
#define DYN_NG_TN_NI(NJ) ((NJ) == 1 ? 8 : (NJ) == 2 ? 5 : (NJ) <= 4 ? 3 : 2)

DYN_NG_INLINE void dyn_ng_tn_cols(int NJ, int m, int k, float alpha, const float* A, int lda, const float* B,
                                  int ldb, float beta, float* C, int ldc) {
    const int NI = DYN_NG_TN_NI(NJ);
    int i = 0;
    for (; i + NI <= m; i += NI) dyn_ng_tn_block(NI, NJ, k, alpha, A + (long)i * lda, lda, B, ldb, beta, C + i, ldc);
    const float* Ai = A + (long)i * lda;
    switch (m - i) {
        case 7: if (NI > 7) dyn_ng_tn_block(7, NJ, k, alpha, Ai, lda, B, ldb, beta, C + i, ldc); break;
        case 6: if (NI > 6) dyn_ng_tn_block(6, NJ, k, alpha, Ai, lda, B, ldb, beta, C + i, ldc); break;
        case 5: if (NI > 5) dyn_ng_tn_block(5, NJ, k, alpha, Ai, lda, B, ldb, beta, C + i, ldc); break;
        case 4: if (NI > 4) dyn_ng_tn_block(4, NJ, k, alpha, Ai, lda, B, ldb, beta, C + i, ldc); break;
        case 3: if (NI > 3) dyn_ng_tn_block(3, NJ, k, alpha, Ai, lda, B, ldb, beta, C + i, ldc); break;
        case 2: if (NI > 2) dyn_ng_tn_block(2, NJ, k, alpha, Ai, lda, B, ldb, beta, C + i, ldc); break;
        case 1: if (NI > 1) dyn_ng_tn_block(1, NJ, k, alpha, Ai, lda, B, ldb, beta, C + i, ldc); break;
        default: break;
    }
}

DYN_TARGET_CLONES
void dyn_sgemm_tn_narrow(int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                         float beta, float* C, int ldc) {
    DYN_NG_BY_GROUPS(dyn_ng_tn_cols)
}

/* B's columns four at a time, then the one to three left */
#define DYN_NG_BY_FOURS(COLS)                                                                         \
    int j = 0;                                                                                        \
    for (; j + 4 <= n; j += 4)                                                                        \
        COLS(4, m, k, alpha, A, lda, B + (long)j * ldb, ldb, beta, C + (long)j * ldc, ldc);           \
    switch (n - j) {                                                                                  \
        case 3: COLS(3, m, k, alpha, A, lda, B + (long)j * ldb, ldb, beta, C + (long)j * ldc, ldc); break; \
        case 2: COLS(2, m, k, alpha, A, lda, B + (long)j * ldb, ldb, beta, C + (long)j * ldc, ldc); break; \
        case 1: COLS(1, m, k, alpha, A, lda, B + (long)j * ldb, ldb, beta, C + (long)j * ldc, ldc); break; \
        default: break;                                                                               \
    }

/* dyn_sgemm_tn_long: the same for a long k (A^T B with A 10,000 x 256, a
 * softmax's W, against the gradients of a sentence's scores): columns of A
 * three at a time, each read once per four of B's columns, along its whole
 * length (the hardware prefetcher follows these). */
DYN_NG_INLINE void dyn_ng_tn_cols3(int NJ, int m, int k, float alpha, const float* A, int lda, const float* B,
                                   int ldb, float beta, float* C, int ldc) {
    int i = 0;
    for (; i + 3 <= m; i += 3) dyn_ng_tn_block(3, NJ, k, alpha, A + (long)i * lda, lda, B, ldb, beta, C + i, ldc);
    if (i + 2 <= m) {
        dyn_ng_tn_block(2, NJ, k, alpha, A + (long)i * lda, lda, B, ldb, beta, C + i, ldc);
        i += 2;
    }
    if (i < m) dyn_ng_tn_block(1, NJ, k, alpha, A + (long)i * lda, lda, B, ldb, beta, C + i, ldc);
}

DYN_NG_INLINE void dyn_ng_tn_long_chunk(int m, int n, int k, float alpha, const float* A, int lda, const float* B,
                                        int ldb, float beta, float* C, int ldc) {
    DYN_NG_BY_FOURS(dyn_ng_tn_cols3)
}

DYN_TARGET_CLONES
void dyn_sgemm_tn_long(int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                       float beta, float* C, int ldc, int kc) {
    if (kc <= 0) kc = k;
    for (int p = 0; p < k; p += kc) {
        int kp = k - p < kc ? k - p : kc;
        dyn_ng_tn_long_chunk(m, n, kp, alpha, A + p, lda, B + p, ldb, p == 0 ? beta : 1.0f, C, ldc);
    }
}

#endif
