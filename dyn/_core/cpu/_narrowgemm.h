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
#include <stdlib.h> /* realloc: the packed A^T B's buffer */

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

/* dyn_sgemm_tn_packed: C = alpha A^T B + beta C for the same shapes with 5 to
 * 32 columns. The dot products above read both operands through L1 with
 * nothing kept there: along a k of 10,000 (a softmax's W^T times the score
 * gradients of a 22-word sentence) that ran at 25-35 GFLOP/s on an AMD
 * EPYC (Zen 3), slower than W h. Here B's rows, kc at a time, are first
 * copied into a buffer row by row (8 NT floats a row, zero padded: NT = 1-4
 * vectors for 5-32 columns), and a tile of NH rows of C (one per column of
 * A) by all its columns, NT vectors of eight, stays in registers along the
 * whole stretch: per step along k,
 * NT loads of the buffer's row and NH broadcasts from A's columns (each read
 * in order, once per stretch) feed NH NT multiply-adds, and nothing is summed
 * across lanes. NH is 6 for NT 1 and 2 (not 12 for NT 1: A's columns of a
 * 1,024-row matrix lie 4 KB apart, and more than about eight of them evict
 * each other from L1), 4 for NT 3 and 2 for NT 4 (three would need 17
 * registers): 6 to 12 sums per tile. Rows of C past the last whole tile
 * take tiles of two and one. The buffer is the calling thread's, grown as
 * needed and kept (at most kc 32 floats). Returns -1, computing nothing,
 * when the buffer cannot be had or n is not 1-32 or k is 0. */
static __thread float* dyn_ng_tp_buf = NULL;
static __thread long dyn_ng_tp_cap = 0;

DYN_NG_INLINE void dyn_ng_tp_tile(int NH, int NT, int kp, const float* A, int lda, const float* P, float* acc) {
    dyn_n8 s[12];
    for (int q = 0; q < NH * NT; q++) s[q] = (dyn_n8){0, 0, 0, 0, 0, 0, 0, 0};
    for (int v = 0; v < kp; v++) {
        const float* p = P + (long)v * 8 * NT;
        dyn_n8 g[4];
        for (int u = 0; u < NT; u++) g[u] = dyn_ng_ld(p + 8 * u);
        __asm__ volatile("" ::: "memory"); /* g stays in registers: else each multiply-add reloads it */
        for (int j = 0; j < NH; j++) {
            float b = A[(long)j * lda + v];
            for (int u = 0; u < NT; u++) s[j * NT + u] += g[u] * b;
        }
    }
    for (int q = 0; q < NH * NT; q++) dyn_ng_st(acc + 8 * q, s[q]);
}

DYN_NG_INLINE void dyn_ng_tp_cols(int NH, int NT, int n, int kp, const float* A, int lda, const float* P,
                                  float alpha, float beta, float* C, int ldc) {
    float acc[12 * 8] __attribute__((aligned(32)));
    dyn_ng_tp_tile(NH, NT, kp, A, lda, P, acc);
    for (int j = 0; j < NH; j++)
        for (int t = 0; t < n; t++) dyn_ng_out1(C + j + (long)t * ldc, acc[j * NT * 8 + t], alpha, beta);
}

DYN_NG_INLINE void dyn_ng_tp_run(int NT, int NH, int m, int n, int kp, const float* A, int lda, const float* P,
                                 float alpha, float beta, float* C, int ldc) {
    int h = 0;
    for (; h + NH <= m; h += NH) dyn_ng_tp_cols(NH, NT, n, kp, A + (long)h * lda, lda, P, alpha, beta, C + h, ldc);
    for (; h + 2 <= m; h += 2) dyn_ng_tp_cols(2, NT, n, kp, A + (long)h * lda, lda, P, alpha, beta, C + h, ldc);
    if (h < m) dyn_ng_tp_cols(1, NT, n, kp, A + (long)h * lda, lda, P, alpha, beta, C + h, ldc);
}

DYN_TARGET_CLONES
int dyn_sgemm_tn_packed(int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                        float beta, float* C, int ldc, int kc) {
    int NT = (n + 7) / 8, W8 = 8 * NT;
    if (n < 1 || n > 32 || k < 1)
        return -1;
    if (kc <= 0 || kc > k) kc = k;
    if (dyn_ng_tp_cap < (long)kc * W8) {
        float* q = (float*)realloc(dyn_ng_tp_buf, sizeof(float) * (size_t)kc * W8 + 32);
        if (q == NULL)
            return -1;
        dyn_ng_tp_buf = q;
        dyn_ng_tp_cap = (long)kc * W8;
    }
    float* P = (float*)(((size_t)dyn_ng_tp_buf + 31) & ~(size_t)31);
    for (int p0 = 0; p0 < k; p0 += kc) {
        int kp = k - p0 < kc ? k - p0 : kc;
        for (int v = 0; v < kp; v++)
            for (int t = n; t < W8; t++) P[(long)v * W8 + t] = 0.0f;
        for (int t = 0; t < n; t++) {
            const float* b = B + (long)t * ldb + p0;
            for (int v = 0; v < kp; v++) P[(long)v * W8 + t] = b[v];
        }
        float bt = p0 == 0 ? beta : 1.0f;
        const float* Ap = A + p0;
        switch (NT) {
            case 1: dyn_ng_tp_run(1, 6, m, n, kp, Ap, lda, P, alpha, bt, C, ldc); break;
            case 2: dyn_ng_tp_run(2, 6, m, n, kp, Ap, lda, P, alpha, bt, C, ldc); break;
            case 3: dyn_ng_tp_run(3, 4, m, n, kp, Ap, lda, P, alpha, bt, C, ldc); break;
            default: dyn_ng_tp_run(4, 2, m, n, kp, Ap, lda, P, alpha, bt, C, ldc); break;
        }
    }
    return 0;
}

#endif
