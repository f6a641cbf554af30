/* float32 products with every side large, for dyn/_core/cpu/blas.pyx: a vocabulary's softmax over a
 * minibatch (C = W H, 10,000 x 256 by 256 x 300-1,500) and its weight gradient (C += G H^T, the
 * inner dimension the minibatch's tokens).
 *
 * The classic blocked scheme of Goto's paper and BLIS: a block of op(B) (KC x NC) is copied into
 * panels of DYN_BG_NR columns, a block of A (MC x KC) into panels of DYN_BG_MR rows, and a
 * register kernel multiplies one panel of each into a 32 x 12 tile of C held in 24 sixteen-float
 * accumulators (two vector loads of A and twelve broadcasts of B feed 24 multiply-adds a step of
 * the inner dimension). The B panel stays in the first-level cache while the A block's panels
 * stream from the second-level cache past it. OpenBLAS does the same with a kernel of 16 x 4
 * accumulators in 16 x 2 for these shapes (its Skylake-X sgemm); on an Intel Xeon of the Sapphire
 * Rapids class it ran these products at 67-84% of its own large square product's rate in
 * training (bench/gemm_trace.py), and this loop at 90-95% of that rate on them in isolation
 * (bench/gemm_shapes.py --big, bench/roofline.py).
 *
 * dyn_sgemm_big takes A not transposed (its columns contiguous), dyn_sgemm_big_tn A^T (a softmax's
 * W^T G, a Tree-LSTM's U^T D: A's columns, contiguous along k, are the rows of op(A), copied into
 * the panels by 16 x 16 transposes in registers); B either way (tb 'N': B is k x n, 'T': B is
 * n x k and op(B) = B^T). C = alpha op(A) op(B) + beta C, with beta = 0 writing C without reading
 * it, and with bias (m entries, or NULL) added to every column as C's entry would be with
 * beta = 1. Column-major storage, as BLAS's. Made for AVX-512's 32 registers (blas.pyx takes it
 * only where the machine has them); the sums run in another order than BLAS's, so results agree
 * with it to float rounding, not bit for bit. Returns 0, or -1 (C untouched) where its buffer
 * cannot be had. */
#ifndef DYN_BIGGEMM_H
#define DYN_BIGGEMM_H

#include <stdlib.h>
#include "_skinnygemm.h" /* dyn_v16, dyn_sk_ld/st, DYN_CLONES_SK */

#define DYN_BG_MR 32
#define DYN_BG_NR 12
#define DYN_BG_MC 192   /* rows of A a block (6 panels) */

static int dyn_bg_kc = 384;   /* the inner dimension a block at most (blas._set_big_blocks) */
static int dyn_bg_nc = 480;   /* columns of op(B) a block at most */
static __thread float* dyn_bg_buf = NULL;
static __thread long dyn_bg_cap = 0;

/* the buffer for one B block and one A block, 64-byte aligned */
static inline float* dyn_bg_buffer(long need) {
    if (need > dyn_bg_cap) {
        float* q = NULL;
        if (posix_memalign((void**)&q, 64, sizeof(float) * (size_t)need) != 0) return NULL;
        free(dyn_bg_buf);
        dyn_bg_buf = q;
        dyn_bg_cap = need;
    }
    return dyn_bg_buf;
}

/* C's 32 x 12 tile from one A panel (kc x 32, step-major) and one B panel (kc x 12): rows and
 * cols say how much of the tile lies in C (the rest of the panels is zero padding) */
DYN_SK_INLINE void dyn_bg_tile(int kc, const float* Ap, const float* Bp, float* C, int ldc, int rows,
                               int cols, float alpha, float beta, const float* bias) {
    dyn_v16 c0[DYN_BG_NR], c1[DYN_BG_NR];
    for (int j = 0; j < DYN_BG_NR; j++) c0[j] = c1[j] = (dyn_v16){0};
    for (int j = 0; j < DYN_BG_NR; j++) {
        __builtin_prefetch(C + (long)(j < cols ? j : 0) * ldc, 1, 3);
        __builtin_prefetch(C + (long)(j < cols ? j : 0) * ldc + 16, 1, 3);
    }
    /* pointers stepped, not indices multiplied: Python's build flags have -fwrapv, under which an
     * int index's products are recomputed every step (15% slower) */
    const float* a = Ap;
    const float* b = Bp;
    for (const float* end = Ap + (long)DYN_BG_MR * kc; a < end; a += DYN_BG_MR, b += DYN_BG_NR) {
        dyn_v16 a0 = *(const dyn_v16*)a, a1 = *(const dyn_v16*)(a + 16);
        for (int j = 0; j < DYN_BG_NR; j++) {
            float y = b[j];
            c0[j] += a0 * y;
            c1[j] += a1 * y;
        }
    }
    dyn_v16 z0 = (dyn_v16){0}, z1 = (dyn_v16){0};
    if (bias && rows == DYN_BG_MR) {
        z0 = dyn_sk_ld(bias);
        z1 = dyn_sk_ld(bias + 16);
    }
    if (alpha != 1.0f)
        for (int j = 0; j < DYN_BG_NR; j++) {
            c0[j] *= alpha;
            c1[j] *= alpha;
        }
    if (rows == DYN_BG_MR && cols == DYN_BG_NR) {   /* a whole tile: the accumulators stored as they are */
        for (int j = 0; j < DYN_BG_NR; j++) {
            float* c = C + (long)j * ldc;
            dyn_v16 r0 = c0[j] + z0, r1 = c1[j] + z1;
            if (beta != 0) {
                r0 += dyn_sk_ld(c) * beta;
                r1 += dyn_sk_ld(c + 16) * beta;
            }
            dyn_sk_st(c, r0);
            dyn_sk_st(c + 16, r1);
        }
        return;
    }
    float t[DYN_BG_NR * DYN_BG_MR] __attribute__((aligned(64)));
    for (int j = 0; j < DYN_BG_NR; j++) {
        *(dyn_v16*)(t + 32 * j) = c0[j];
        *(dyn_v16*)(t + 32 * j + 16) = c1[j];
    }
    for (int j = 0; j < cols; j++) {
        float* c = C + (long)j * ldc;
        for (int i = 0; i < rows; i++) {
            float r = t[32 * j + i];
            if (beta != 0) r += c[i] * beta;
            if (bias) r += bias[i];
            c[i] = r;
        }
    }
}


/* 16 x 16 transpose of a block of A^T into a panel: src points at A[p0 + i0 lda] (16 columns of A,
 * each contiguous along k, lda apart), dst at the panel's q[32 p0 + i0] (rows of the panel 32
 * apart); a transpose in four rounds of two-register shuffles (GCC's portable vector shuffles,
 * which compile to AVX-512's permutes) */
DYN_SK_INLINE void dyn_bg_t16s(const float* src, long lda, float* dst, int rows, int stride) {
    typedef int dyn_i16 __attribute__((vector_size(64)));
    dyn_v16 r[16], t[16];
    for (int i = 0; i < 16; i++) r[i] = i < rows ? dyn_sk_ld(src + (long)i * lda) : (dyn_v16){0};
    /* round 1: pairs of rows, 1-float interleave */
    for (int i = 0; i < 16; i += 2) {
        t[i] = __builtin_shuffle(r[i], r[i + 1], (dyn_i16){0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30});
        t[i + 1] = __builtin_shuffle(r[i], r[i + 1], (dyn_i16){1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31});
    }
    /* round 2: 2-float blocks */
    for (int b = 0; b < 16; b += 4)
        for (int j = 0; j < 2; j++) {
            r[b + j] = __builtin_shuffle(t[b + j], t[b + j + 2], (dyn_i16){0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29});
            r[b + j + 2] = __builtin_shuffle(t[b + j], t[b + j + 2], (dyn_i16){2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31});
        }
    /* round 3: 4-float blocks */
    for (int b = 0; b < 16; b += 8)
        for (int j = 0; j < 4; j++) {
            t[b + j] = __builtin_shuffle(r[b + j], r[b + j + 4], (dyn_i16){0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27});
            t[b + j + 4] = __builtin_shuffle(r[b + j], r[b + j + 4], (dyn_i16){4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31});
        }
    /* round 4: 8-float blocks */
    for (int j = 0; j < 8; j++) {
        r[j] = __builtin_shuffle(t[j], t[j + 8], (dyn_i16){0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23});
        r[j + 8] = __builtin_shuffle(t[j], t[j + 8], (dyn_i16){8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31});
    }
    /* r[q] now holds step p0 + q of the 16 rows */
    for (int q = 0; q < 16; q++) dyn_sk_st(dst + (long)stride * q, r[q]);
}

/* op(B)'s block (steps [pc, pc + kc), columns [jc, jc + nc)) into panels of NR columns,
 * step-major, zero past n. B^T's steps are rows of B (contiguous columns); B's columns are
 * contiguous along k, so each panel is made by 16 x 16 transposes of up to 12 columns, every step's
 * 16 floats stored whole (the last 4 overwritten by the next step's; the buffer has 16 floats of
 * room past the block for the last) */
DYN_SK_INLINE void dyn_bg_pack_b(char tb, const float* B, int ldb, int pc, int kc, int jc, int nc, float* Bp) {
    for (int jr = 0; jr < nc; jr += DYN_BG_NR) {
        float* q = Bp + (long)jr * kc;
        int w = nc - jr < DYN_BG_NR ? nc - jr : DYN_BG_NR;
        if (tb == 'T') {
            for (int p = 0; p < kc; p++) {
                const float* src = B + (jc + jr) + (long)(pc + p) * ldb;
                int j = 0;
                for (; j < w; j++) q[DYN_BG_NR * p + j] = src[j];
                for (; j < DYN_BG_NR; j++) q[DYN_BG_NR * p + j] = 0;
            }
        } else {
            const float* src = B + pc + (long)(jc + jr) * ldb;
            int p = 0;
            for (; p + 16 <= kc; p += 16) dyn_bg_t16s(src + p, ldb, q + DYN_BG_NR * p, w, DYN_BG_NR);
            for (; p < kc; p++) {
                int j = 0;
                for (; j < w; j++) q[DYN_BG_NR * p + j] = src[p + (long)j * ldb];
                for (; j < DYN_BG_NR; j++) q[DYN_BG_NR * p + j] = 0;
            }
        }
    }
}

DYN_CLONES_SK static int dyn_sgemm_big(char tb, int m, int n, int k, float alpha, const float* A, int lda,
                                       const float* B, int ldb, float beta, float* C, int ldc,
                                       const float* bias) {
    int kb = (k + dyn_bg_kc - 1) / dyn_bg_kc;           /* k in kb blocks as even as they come */
    int KC = (k + kb - 1) / kb;
    int nb = (n + dyn_bg_nc - 1) / dyn_bg_nc;
    int NC = ((n + nb - 1) / nb + DYN_BG_NR - 1) / DYN_BG_NR * DYN_BG_NR;
    long bsize = ((long)NC * KC + 16 + 15) / 16 * 16;   /* (16 floats of room past the B block, and
                                                          * the A block 64-byte aligned after it) */
    float* Bp = dyn_bg_buffer(bsize + (long)DYN_BG_MC * KC);
    if (!Bp) return -1;
    float* Ap = Bp + bsize;
    for (int jc = 0; jc < n; jc += NC) {
        int nc = n - jc < NC ? n - jc : NC;
        for (int pc = 0; pc < k; pc += KC) {
            int kc = k - pc < KC ? k - pc : KC;
            float be = pc == 0 ? beta : 1.0f;
            const float* bi = pc == 0 ? bias : NULL;
            dyn_bg_pack_b(tb, B, ldb, pc, kc, jc, nc, Bp);
            for (int ic = 0; ic < m; ic += DYN_BG_MC) {
                int mc = m - ic < DYN_BG_MC ? m - ic : DYN_BG_MC;
                /* A's block, in panels of MR rows, step-major, zero past m */
                for (int ir = 0; ir < mc; ir += DYN_BG_MR) {
                    float* q = Ap + (long)ir * kc;
                    int h = mc - ir < DYN_BG_MR ? mc - ir : DYN_BG_MR;
                    const float* src = A + (ic + ir) + (long)pc * lda;
                    if (h == DYN_BG_MR) {
                        for (int p = 0; p < kc; p++) {
                            *(dyn_v16*)(q + 32 * p) = dyn_sk_ld(src + (long)p * lda);
                            *(dyn_v16*)(q + 32 * p + 16) = dyn_sk_ld(src + (long)p * lda + 16);
                        }
                    } else {
                        for (int p = 0; p < kc; p++) {
                            int i = 0;
                            for (; i < h; i++) q[32 * p + i] = src[(long)p * lda + i];
                            for (; i < DYN_BG_MR; i++) q[32 * p + i] = 0;
                        }
                    }
                }
                for (int jr = 0; jr < nc; jr += DYN_BG_NR) {
                    int w = nc - jr < DYN_BG_NR ? nc - jr : DYN_BG_NR;
                    for (int ir = 0; ir < mc; ir += DYN_BG_MR) {
                        int h = mc - ir < DYN_BG_MR ? mc - ir : DYN_BG_MR;
                        dyn_bg_tile(kc, Ap + (long)ir * kc, Bp + (long)jr * kc,
                                    C + (ic + ir) + (long)(jc + jr) * ldc, ldc, h, w, alpha, be,
                                    bi ? bi + ic + ir : NULL);
                    }
                }
            }
        }
    }
    return 0;
}

/* C = alpha A^T op(B) + beta C with A k x m (lda >= k; its columns the rows of A^T, contiguous
 * along k) and B as dyn_sgemm_big's: the A^T of a softmax's backward (W^T G, 256 x a minibatch's
 * tokens from k = 10,000). For each stretch of k, all m rows of A^T are copied into panels once
 * (16 x 16 blocks transposed in registers) and every block of op(B) passes them. */
DYN_CLONES_SK static int dyn_sgemm_big_tn(char tb, int m, int n, int k, float alpha, const float* A, int lda,
                                          const float* B, int ldb, float beta, float* C, int ldc) {
    int kb = (k + dyn_bg_kc - 1) / dyn_bg_kc;
    int KC = (k + kb - 1) / kb;
    int nb = (n + dyn_bg_nc - 1) / dyn_bg_nc;
    int NC = ((n + nb - 1) / nb + DYN_BG_NR - 1) / DYN_BG_NR * DYN_BG_NR;
    int mp = (m + DYN_BG_MR - 1) / DYN_BG_MR;
    long bsize = ((long)NC * KC + 16 + 15) / 16 * 16;   /* (16 floats of room past the B block) */
    float* Bp = dyn_bg_buffer(bsize + (long)mp * DYN_BG_MR * KC);
    if (!Bp) return -1;
    float* Ap = Bp + bsize;
    for (int pc = 0; pc < k; pc += KC) {
        int kc = k - pc < KC ? k - pc : KC;
        float be = pc == 0 ? beta : 1.0f;
        /* A^T's rows [0, m) over this stretch, in panels of MR rows, step-major, zero past m */
        for (int ir = 0; ir < m; ir += DYN_BG_MR) {
            float* q = Ap + (long)ir * kc;
            int h = m - ir < DYN_BG_MR ? m - ir : DYN_BG_MR;
            const float* src = A + pc + (long)ir * lda;
            int p = 0, h0 = h < 16 ? h : 16, h1 = h - h0;   /* rows in each half of the panel */
            for (; p + 16 <= kc; p += 16) {
                dyn_bg_t16s(src + p, lda, q + 32L * p, h0, 32);
                dyn_bg_t16s(src + p + 16L * lda, lda, q + 32L * p + 16, h1, 32);
            }
            for (; p < kc; p++) {
                int i = 0;
                for (; i < h; i++) q[32L * p + i] = src[p + (long)i * lda];
                for (; i < DYN_BG_MR; i++) q[32L * p + i] = 0;
            }
        }
        for (int jc = 0; jc < n; jc += NC) {
            int nc = n - jc < NC ? n - jc : NC;
            dyn_bg_pack_b(tb, B, ldb, pc, kc, jc, nc, Bp);
            for (int jr = 0; jr < nc; jr += DYN_BG_NR) {
                int w = nc - jr < DYN_BG_NR ? nc - jr : DYN_BG_NR;
                for (int ir = 0; ir < m; ir += DYN_BG_MR) {
                    int h = m - ir < DYN_BG_MR ? m - ir : DYN_BG_MR;
                    dyn_bg_tile(kc, Ap + (long)ir * kc, Bp + (long)jr * kc, C + ir + (long)(jc + jr) * ldc,
                                ldc, h, w, alpha, be, NULL);
                }
            }
        }
    }
    return 0;
}

#endif
