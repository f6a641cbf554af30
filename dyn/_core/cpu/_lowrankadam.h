/* Adam on a weight whose gradient is one product, G = A B^T, without writing G to memory: for
 * dyn/_core/cpu/blas.pyx, after _skinnygemm.h (whose panel buffer and block kernel it uses) and
 * _fastopt.h (Adam's arithmetic).
 *
 * An RNN language model's softmax weights (10,000 x 256) get their gradient from one product per
 * sentence, G = D H^T over the sentence's 20-odd words. Computed as dyn_sgemm_nt_tall computes it,
 * G is 10 MB written to memory, which the Adam step that follows reads back and zeroes while it
 * reads and writes the weights and both moments. Here G's 64 x 4 blocks are computed in
 * registers, into a 1 KB tile, and Adam steps the block's weights and moments at once: G's 10 MB
 * never leave the tile. The product's multiply-adds remain (on a Zen 4 core they take as long as
 * dyn_sgemm_nt_tall's, about 1.2 ms at 22 columns), so what is saved is G's trip through memory:
 * the backward pass and the step of a 10k x 256 softmax took 1.03-1.15x as long without this at
 * 4-28 columns, and were level at 32 and more (bench/lowrank_adam.py); on an Intel Xeon, against
 * OpenBLAS's product, 1.2-1.67x at 4-32 columns (blas.pyx's _lr_shape has the rules). The sums
 * are those of dyn_sgemm_nt_tall (each entry's k products added in order, in
 * the same block kernel) and the step is dyn_adam_f32's, so the weights and moments come out as
 * the product followed by the step would leave them, bit for bit. The gradient's memory C (known
 * to be zero) is only used for the rows past the last whole 64-row panel, computed there and
 * zeroed again, as the step would. */
#ifndef DYN_LOWRANKADAM_H
#define DYN_LOWRANKADAM_H

#include "_skinnygemm.h"
#include "_fastopt.h"

/* 64-row panels ahead that the weights and moments are fetched, one line of each array with each
 * 16 elements stepped (blas._set_lowrank_ahead). On an AMD EPYC (Zen 4), bench/lowrank_adam.py
 * (a 10k x 256 softmax, 12-28 columns, 21 blocks each way): the backward pass and step took
 * 1.12-1.22x as long computed as held back with two panels ahead, 1.06-1.11x with one, 1.01-1.15x
 * with three, and at 22 columns 0.99x with none; fetching all of the next panel's lines before
 * each block (48 at once) lost to computing the product apart. */
static int dyn_lr_ahead = 2;

/* Adam on 64 elements from their gradient t: the arithmetic of dyn_adam_f32's vector loop (the
 * same expression, a whole number of vectors, so no element falls to a scalar remainder, where
 * the compiler may fuse the multiply-adds differently). pf: how far ahead (elements) the lines of
 * w, mo and v are fetched, 0 for none. */
DYN_SK_INLINE void dyn_lr_adam64(const float* restrict t, float* restrict w, float* restrict mo,
                                 float* restrict v, float gs, float l2, float c1, float c2, float alpha,
                                 float eps, float d, long pf) {
    if (pf)
        for (int l = 0; l < 4; l++) {
            __builtin_prefetch(w + pf + 16 * l, 1, 3);
            __builtin_prefetch(mo + pf + 16 * l, 1, 3);
            __builtin_prefetch(v + pf + 16 * l, 1, 3);
        }
    if (dyn_adam_plain(gs, l2, d))
        for (int e = 0; e < 64; e++)
            w[e] = dyn_adam_elem1_f32(t[e], w[e], mo + e, v + e, c1, c2, alpha, eps);
    else
        for (int e = 0; e < 64; e++)
            w[e] = dyn_adam_elem_f32(dyn_adam_grad(t[e], gs, l2, w[e]), w[e], mo + e, v + e, c1, c2, alpha, eps, d);
}

/* Adam on w, mo, v (m x n, column-major, ld m) with gradient A B^T (A m x k, ld lda; B n x k, ld
 * ldb), scaled by gs, plus l2 w; C: the gradient's memory (zero; its last m % 64 rows are used
 * and left zero). Returns -1 (nothing done) when the panel buffer cannot be had. */
DYN_CLONES_SK static int dyn_adam_nt_f32(int m, int n, int k, const float* A, int lda, const float* B,
                                         int ldb, float* C, float* w, float* mo, float* v, float gs,
                                         float l2, float c1, float c2, float alpha, float eps, float d) {
    int np = m / 64, mt = np * 64;
    float* P = dyn_sk_nt_panels(m, k, A, lda);   /* A's panels, as dyn_sgemm_nt_tall reads them */
    if (P == NULL) return -1;
    float T[4 * 64] __attribute__((aligned(64)));
    int ahead = dyn_lr_ahead;
    for (int j = 0; j < n; j += 4) {
        int nj = n - j < 4 ? n - j : 4;
        const float* b = B + j;      /* B^T's entry (p, j + c) is B[j + c + p ldb] */
        for (int i = 0; i < np; i++) {
            const float* a = P + (long)i * k * 64;
            long o = (long)i * 64 + (long)j * m;
            long pf = i + ahead < np ? 64L * ahead : 0;
            switch (nj) {
            case 4: dyn_sk_nn_block(4, 4, k, a, 64, b, ldb, 1, T, 64, 1.0f, 0.0f, 0, 0, 0, 0); break;
            case 3: dyn_sk_nn_block(4, 3, k, a, 64, b, ldb, 1, T, 64, 1.0f, 0.0f, 0, 0, 0, 0); break;
            case 2: dyn_sk_nn_block(4, 2, k, a, 64, b, ldb, 1, T, 64, 1.0f, 0.0f, 0, 0, 0, 0); break;
            default: dyn_sk_nn_block(4, 1, k, a, 64, b, ldb, 1, T, 64, 1.0f, 0.0f, 0, 0, 0, 0); break;
            }
            for (int q = 0; q < nj; q++) {
                long c = o + (long)q * m;
                dyn_lr_adam64(T + q * 64, w + c, mo + c, v + c, gs, l2, c1, c2, alpha, eps, d, pf);
            }
        }
    }
    if (mt < m) {                    /* the last rows: as dyn_sgemm_nt_tall, then the step */
        int r = m - mt;
        float W4[3 * 64] __attribute__((aligned(64)));
        float *tw = W4, *tm = W4 + 64, *tv = W4 + 128;
        dyn_sgemm_nx(r, n, k, 1.0f, A + mt, lda, B, ldb, 1, 1.0f, C + mt, m, 1, 0);
        for (int e = 0; e < 64; e++) T[e] = 0.0f;
        memset(W4, 0, sizeof(W4));
        for (int j = 0; j < n; j++) {  /* each column's rows through the 64-element step */
            long o = mt + (long)j * m;
            memcpy(T, C + o, sizeof(float) * r);
            memcpy(tw, w + o, sizeof(float) * r);
            memcpy(tm, mo + o, sizeof(float) * r);
            memcpy(tv, v + o, sizeof(float) * r);
            dyn_lr_adam64(T, tw, tm, tv, gs, l2, c1, c2, alpha, eps, d, 0);
            memcpy(w + o, tw, sizeof(float) * r);
            memcpy(mo + o, tm, sizeof(float) * r);
            memcpy(v + o, tv, sizeof(float) * r);
            memset(C + o, 0, sizeof(float) * r);
        }
    }
    return 0;
}

#endif
