/* float32 C = alpha A^T B + beta C as blocks of sixteen dot products, for dyn/_core/cpu/blas.pyx.
 *
 * A^T B with a short inner dimension k (64 to a few thousand) and few columns of B is the
 * gradient that reaches a layer's input through its weights: a tagger's W_x^T D (128 x 22 from a
 * 200 x 128 W_x and a sentence's 22 gate gradients), a Tree-LSTM level's U^T D (128 x 2 from a
 * 640 x 128 block of U). Both operands' columns are contiguous along k, so each entry of C is a
 * dot product of two contiguous vectors. OpenBLAS packs both operands for such a product and
 * reached 40-45% of this core's multiply-add peak on the tagger's shape (an Intel Xeon with
 * AVX-512); _skinnygemm.h's dyn_sgemm_tn sums each entry's sixteen lanes and the last k % 16
 * products in scalar code, which at k = 200 costs as much as the vector loop.
 *
 * Here a block of C is NI columns of A by NJ columns of B with NI NJ = 16 (16 x 1, 8 x 2 or
 * 4 x 4): sixteen vector accumulators, NI + NJ loads feeding sixteen multiply-adds per sixteen
 * entries of k, enough independent sums to keep both multiply-add units busy. The last k % 16
 * entries are read as the columns' last sixteen with the lanes already summed cleared (a bitwise
 * and on both operands: no scalar loop, and an infinity in a cleared lane adds nothing), and
 * the sixteen accumulators are summed lane by lane into one vector holding the block's sixteen
 * entries (dyn_sb_sum16). A block's columns of A and B are read straight from memory; B's
 * columns of a pass stay in the first-level cache while A's stream past them once per pass.
 * Columns past the end of A in the last block repeat its last column and are not stored.
 * Needs k >= 16 (the caller routes shorter products elsewhere). The sums run in another order
 * than OpenBLAS's: results agree with it to float rounding, not bit for bit. */
#ifndef DYN_DOTGEMM_H
#define DYN_DOTGEMM_H

#include "_smallblas.h"   /* dyn_v16, dyn_sb_i16, dyn_sb_sum16, the clones */

/* C's NI x NJ block at rows i (columns of A) and columns j (of B); ni, nj: how many of them
 * exist (the rest repeat the last and are not stored). msk: the lanes of the last sixteen
 * entries of k not yet summed (all ones there, zero elsewhere). */
DYN_SK_INLINE void dyn_dg_block(int NI, int NJ, int ni, int nj, int k, const float* A, int lda,
                                const float* B, int ldb, float alpha, float beta, float* C, int ldc,
                                dyn_sb_i16 msk) {
    const float* a[16];
    const float* b[16];
    dyn_v16 s[16];
    for (int x = 0; x < NI; x++) a[x] = A + (long)(x < ni ? x : ni - 1) * lda;
    for (int y = 0; y < NJ; y++) b[y] = B + (long)(y < nj ? y : nj - 1) * ldb;
    for (int e = 0; e < NI * NJ; e++) s[e] = (dyn_v16){0};
    int kv = k / 16 * 16;
    for (int p = 0; p < kv; p += 16) {
        dyn_v16 xa[16], yb[16];
        for (int x = 0; x < NI; x++) __builtin_prefetch(a[x] + p + 32, 0, 3);
        for (int x = 0; x < NI; x++) xa[x] = dyn_sk_ld(a[x] + p);
        for (int y = 0; y < NJ; y++) yb[y] = dyn_sk_ld(b[y] + p);
        for (int x = 0; x < NI; x++)
            for (int y = 0; y < NJ; y++) s[x * NJ + y] += xa[x] * yb[y];
    }
    if (kv < k) {
        dyn_v16 xa[16], yb[16];
        for (int x = 0; x < NI; x++) xa[x] = (dyn_v16)((dyn_sb_i16)dyn_sk_ld(a[x] + k - 16) & msk);
        for (int y = 0; y < NJ; y++) yb[y] = (dyn_v16)((dyn_sb_i16)dyn_sk_ld(b[y] + k - 16) & msk);
        for (int x = 0; x < NI; x++)
            for (int y = 0; y < NJ; y++) s[x * NJ + y] += xa[x] * yb[y];
    }
    for (int e = NI * NJ; e < 16; e++) s[e] = (dyn_v16){0};
    dyn_v16 r = alpha * dyn_sb_sum16(s);   /* lane x NJ + y: C's entry (i + x, j + y) */
    for (int x = 0; x < ni; x++)
        for (int y = 0; y < nj; y++) {
            float* c = C + x + (long)y * ldc;
            float v = r[x * NJ + y];
            *c = beta != 0 ? v + beta * *c : v;
        }
}

/* Every column of A in blocks of NI against columns j0 .. j1 of B in blocks of NJ = 16 / NI (the
 * last block as many as are left: fewer accumulators, the unused lanes of the sum zero), each
 * block of A reused from the first-level cache by every block of B. */
#define DYN_DG_NJ(NI, NJ) dyn_dg_block(NI, NJ, ni, nj, k, a, lda, B + (long)j * ldb, ldb, alpha, beta, \
                                      C + i + (long)j * ldc, ldc, msk)
DYN_SK_INLINE void dyn_dg_pass(int NI, int m, int j0, int j1, int k, const float* A, int lda,
                               const float* B, int ldb, float alpha, float beta, float* C, int ldc,
                               dyn_sb_i16 msk) {
    int NJ = 16 / NI;
    for (int i = 0; i < m; i += NI) {
        int ni = m - i < NI ? m - i : NI;
        const float* a = A + (long)i * lda;
        for (int j = j0; j < j1; j += NJ) {
            int nj = j1 - j < NJ ? j1 - j : NJ;
            switch (NI * 8 + nj) {
            case 4 * 8 + 4: DYN_DG_NJ(4, 4); break;
            case 4 * 8 + 3: DYN_DG_NJ(4, 3); break;
            case 4 * 8 + 2: DYN_DG_NJ(4, 2); break;
            case 4 * 8 + 1: DYN_DG_NJ(4, 1); break;
            case 5 * 8 + 3: DYN_DG_NJ(5, 3); break;
            case 5 * 8 + 2: DYN_DG_NJ(5, 2); break;
            case 5 * 8 + 1: DYN_DG_NJ(5, 1); break;
            case 8 * 8 + 2: DYN_DG_NJ(8, 2); break;
            case 8 * 8 + 1: DYN_DG_NJ(8, 1); break;
            default: DYN_DG_NJ(16, 1); break;
            }
        }
    }
}

/* C = alpha A^T B + beta C: A k x m (ld lda), B k x n (ld ldb), C m x n (ld ldc); k >= 16. One
 * pass over A: blocks of 16 x 1 for one column of B, 8 x 2 for two, 5 x 3 for three or six, 4 x 4
 * otherwise (the last block of B's columns narrower). */
DYN_CLONES static void dyn_sgemm_tn_dot(int m, int n, int k, float alpha, const float* A, int lda,
                                        const float* B, int ldb, float beta, float* C, int ldc) {
    dyn_sb_i16 msk;
    int r = k % 16;
    for (int l = 0; l < 16; l++) msk[l] = l >= 16 - r ? -1 : 0;
    int NI = n == 1 ? 16 : n == 2 ? 8 : (n == 3 || n == 6) ? 5 : 4;
    dyn_dg_pass(NI, m, 0, n, k, A, lda, B, ldb, alpha, beta, C, ldc, msk);
}

#endif
