/* float32 C = alpha A B + beta C for B of a few columns (1-8), for dyn/_core/cpu/blas.pyx.
 *
 * A Tree-LSTM level's gates, U [h_l; h_r] over the level's nodes: a 640 x 256 U times 1-8
 * columns, once per level of every tree, forward. Each entry of A feeds n multiply-adds, so the
 * product is bound by how fast A streams from the second-level cache at one or two columns and by
 * the multiply-add units from three on; what counts is keeping enough independent sums in
 * registers and A's columns streaming. OpenBLAS's small-matrix kernel took 1.5-1.7x this loop's
 * time at 3, 5 and 6 columns on an Intel Xeon with AVX-512 (_skinnygemm.h's dyn_sgemm_nn, whose
 * panels are fetched ahead for an AMD EPYC, 1.2-2x).
 *
 * Rows go in blocks of 128 (eight sixteen-float accumulators per column) for up to three columns,
 * of 64 (four per column) in column blocks of up to six otherwise: 16-24 independent sums per
 * step of k, each loaded entry of A feeding every column of the block. The rows past the last
 * whole block of 16 are computed as a 16-row block ending at row m into a small tile, from which
 * only those rows are written (C's other rows untouched; no scalar loop). Needs m >= 16. The sums
 * run in another order than OpenBLAS's: the results agree with it to float rounding. */
#ifndef DYN_FEWGEMM_H
#define DYN_FEWGEMM_H

#include "_skinnygemm.h"   /* dyn_v16, dyn_sk_ld, dyn_sk_st, dyn_sk_split, the clones */

/* NR x 16 rows by NJ columns of C = alpha A B + beta C (C: the block's first entry, ld ldc), plus
 * the bias's entries for these rows in every column where bias is not 0: _skinnygemm.h's block,
 * with no panel fetched ahead (the columns of A stream in order). */
DYN_SK_INLINE void dyn_fg_block(int NR, int NJ, int k, const float* A, int lda, const float* B, int ldb,
                                float alpha, float beta, const float* bias, float* C, int ldc) {
    dyn_sk_nn_block(NR, NJ, k, A, lda, B, 1, ldb, C, ldc, alpha, beta, bias, 0, 0, 0);
}

/* One block of NR x 16 rows from row ROW, the column block's nj columns, stored to CP (ld LD) with
 * beta BETA and the bias (0 or m entries) from row ROW. */
#define DYN_FG_NJ(NR, NJ, ROW, CP, LD, BETA) \
    dyn_fg_block(NR, NJ, k, A + (ROW), lda, b, ldb, alpha, BETA, bias ? bias + (ROW) : 0, CP, LD)
#define DYN_FG_CASES(NR, ROW, CP, LD, BETA)                                                      \
    switch (nj) {                                                                                \
    case 6: DYN_FG_NJ(NR, 6, ROW, CP, LD, BETA); break;                                          \
    case 5: DYN_FG_NJ(NR, 5, ROW, CP, LD, BETA); break;                                          \
    case 4: DYN_FG_NJ(NR, 4, ROW, CP, LD, BETA); break;                                          \
    case 3: DYN_FG_NJ(NR, 3, ROW, CP, LD, BETA); break;                                          \
    case 2: DYN_FG_NJ(NR, 2, ROW, CP, LD, BETA); break;                                          \
    default: DYN_FG_NJ(NR, 1, ROW, CP, LD, BETA); break;                                         \
    }

/* C = alpha A B + beta C (+ bias 1^T where bias is not 0: m entries added to every column, beta then
 * 0): A m x k (ld lda), B k x n (ld ldb), C m x n (ld ldc); m >= 16, n <= 8 is what it is made for
 * (any n works, in column blocks). */
DYN_SK_INLINE void dyn_fg_run(int m, int n, int k, float alpha, const float* A, int lda, const float* B,
                              int ldb, float beta, const float* bias, float* C, int ldc) {
    int start[64];
    int wide = n <= 3;                        /* 128-row blocks for up to three columns */
    int mb = m / 16 * 16;
    for (int j0 = 0; j0 < n; j0 += 60) {      /* (columns in groups of 60, blocks of up to 6) */
        int ng = n - j0 < 60 ? n - j0 : 60;
        int nb = dyn_sk_split(ng, 6, start);
        for (int q = 0; q < nb; q++) {
            int j = j0 + start[q], nj = start[q + 1] - start[q];
            const float* b = B + (long)j * ldb;
            float* cj = C + (long)j * ldc;
            int i = 0;
            if (wide)
                for (; i + 128 <= mb; i += 128) DYN_FG_CASES(8, i, cj + i, ldc, beta)
            for (; i + 64 <= mb; i += 64) DYN_FG_CASES(4, i, cj + i, ldc, beta)
            for (; i < mb; i += 16) DYN_FG_CASES(1, i, cj + i, ldc, beta)
            if (mb < m) {   /* rows mb .. m: the 16 rows ending at m, computed into a tile */
                float tile[16 * 6] __attribute__((aligned(64)));
                int r0 = m - 16;
                DYN_FG_CASES(1, r0, tile, 16, 0.0f)
                for (int y = 0; y < nj; y++)
                    for (int x = 16 - (m - mb); x < 16; x++) {
                        float* o = cj + r0 + x + (long)y * ldc;
                        float v = tile[x + 16 * y];
                        *o = beta != 0 ? v + beta * *o : v;
                    }
            }
        }
    }
}

DYN_CLONES_SK static void dyn_sgemm_nn_few(int m, int n, int k, float alpha, const float* A, int lda,
                                           const float* B, int ldb, float beta, float* C, int ldc) {
    dyn_fg_run(m, n, k, alpha, A, lda, B, ldb, beta, 0, C, ldc);
}

/* C = A B + bias 1^T: an affine transform's forward, the values of copying the bias into C and then
 * dyn_sgemm_nn_few with beta = 1 (see dyn_sgemm_nn_bias). */
DYN_CLONES_SK static void dyn_sgemm_nn_few_bias(int m, int n, int k, const float* A, int lda, const float* B,
                                                int ldb, const float* bias, float* C, int ldc) {
    dyn_fg_run(m, n, k, 1.0f, A, lda, B, ldb, 0.0f, bias, C, ldc);
}

#endif
