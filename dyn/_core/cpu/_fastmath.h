/* Vectorisable float32 exp/tanh/logistic/softmax (and a column sum) for dyn's
 * elementwise kernels.
 * exp: x = n ln2 + r with |r| <= ln2/2 (ln2 split in two for exactness),
 * e^r by its degree-6 Taylor polynomial (error < 1.2e-7 relative), 2^n
 * assembled in the exponent bits. Plain float arithmetic and an int
 * conversion: GCC vectorises loops over these (SSE2 and up). */
#ifndef DYN_FASTMATH_H
#define DYN_FASTMATH_H
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>   /* SSE streaming stores (every x86-64) */
#endif

/* e^x for |x| <= 87 (relative error < 2.5e-7). Outside that range the
 * exponent is clamped instead of x (a float clamp there stops GCC from
 * vectorising the loop): for large positive x the result is then huge or
 * inf, which is all tanh and logistic below need (inside 1/(1 + e)); they
 * never call it with a large negative argument. */
static inline __attribute__((always_inline)) float dyn_exp_ratio_f(float x) {
    float t = x * 1.44269504088896341f;
    int32_t k = (int32_t)(t + (t >= 0.0f ? 0.5f : -0.5f));
    k = k < -126 ? -126 : k;
    k = k > 127 ? 127 : k;
    float n = (float)k;
    float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.66666672e-1f + r * (4.16666679e-2f
              + r * (8.33333377e-3f + r * 1.38888892e-3f)))));
    int32_t bits = (k + 127) << 23;
    float s;
    memcpy(&s, &bits, sizeof s);
    return p * s;
}

static inline __attribute__((always_inline)) float dyn_tanhf(float x) {
    float a = x < 0.0f ? -x : x;
    /* odd Taylor series near 0, where 1 - 2/(e^2x + 1) would cancel */
    float z = x * x;
    float small = x * (1.0f + z * (-3.33333343e-1f + z * (1.33333340e-1f + z * (-5.39682545e-2f
                  + z * 2.18694885e-2f))));
    float e = dyn_exp_ratio_f(2.0f * a);
    float big = 1.0f - 2.0f / (e + 1.0f);
    big = x < 0.0f ? -big : big;
    return a < 0.3f ? small : big;
}

static inline __attribute__((always_inline)) float dyn_logisticf(float x) {
    /* only e^|x| (never of a large negative argument, which the clamped
     * exponent cannot give): d = 1/(1+e^|x|) is the smaller tail */
    float a = x < 0.0f ? -x : x;
    float d = 1.0f / (1.0f + dyn_exp_ratio_f(a));
    return x < 0.0f ? d : 1.0f - d;
}

/* e^x for any x <= 88: dyn_exp_ratio_f, and 0 where x is below the float
 * range (e^-87.4 < FLT_MIN; -inf gives 0). A select on the result keeps the
 * loop vectorised. NaN stays NaN. */
static inline __attribute__((always_inline)) float dyn_expf(float x) {
    float e = dyn_exp_ratio_f(x);
    return x < -87.3f ? 0.0f : e;
}

/* e^x for x <= 0, the softmax's shifted arguments (x - max): dyn_expf's
 * polynomial and accuracy with fewer operations. n = round(x / ln2) by the
 * 1.5 * 2^23 shift (round to nearest even; no clamps: above -87.3 the
 * exponent n + 127 is at least 1, and below it the select gives 0). -inf
 * gives 0, NaN stays NaN. Not for x > 0. */
static inline __attribute__((always_inline)) float dyn_expf_neg(float x) {
    float t = x * 1.44269504088896341f;
    float n = (t + 12582912.0f) - 12582912.0f;
    float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.66666672e-1f + r * (4.16666679e-2f
              + r * (8.33333377e-3f + r * 1.38888892e-3f)))));
    int32_t bits = ((int32_t)n + 127) << 23;
    float s;
    memcpy(&s, &bits, sizeof s);
    return x < -87.3f ? 0.0f : p * s;
}

#include "_clones.h"
#define DYN_CLONES_FM DYN_TARGET_CLONES

/* loops compiled per instruction set, chosen when the module loads */
DYN_CLONES_FM static void dyn_tanh_f32(float* y, const float* x, long n) {
    for (long i = 0; i < n; i++) y[i] = dyn_tanhf(x[i]);
}
DYN_CLONES_FM static void dyn_logistic_f32(float* y, const float* x, long n) {
    for (long i = 0; i < n; i++) y[i] = dyn_logisticf(x[i]);
}

/* y[i] += sum_j G[i + j m] over the C columns of G (m x C): a bias gradient
 * over a whole batch. Four columns per pass over y, so y (m floats, in
 * cache) is read and written C / 4 times while G streams once. */
DYN_CLONES_FM static void dyn_colsum_acc_f32(float* restrict y, const float* restrict G, long m, long C) {
    long i, j = 0;
    for (; j + 4 <= C; j += 4) {
        const float *g0 = G + j * m, *g1 = g0 + m, *g2 = g1 + m, *g3 = g2 + m;
        for (i = 0; i < m; i++) y[i] += (g0[i] + g1[i]) + (g2[i] + g3[i]);
    }
    for (; j < C; j++)
        for (i = 0; i < m; i++) y[i] += G[j * m + i];
}

/* y[:, j] = b for the n columns of y (m x n, contiguous): a bias broadcast over
 * a batch, before the product is added to it. Where y is larger than a core's
 * L2 (8 MB and up: a 10k softmax over 200 and more tokens) its memory is cold
 * and is about to be read once by the product, so the columns go out with
 * streaming stores: memcpy's ordinary stores first read every line of y into
 * the cache, twice the traffic (measured: 56 MB in 2.5 ms against 5.0). */
static long dyn_bcast_stream_bytes = 8L << 20;  /* settable for tests (arith.pyx) */
static void dyn_bcast_cols_f32(float* y, const float* b, long m, long n) {
#if defined(__x86_64__) || defined(_M_X64)
    if (m * n * (long)sizeof(float) >= dyn_bcast_stream_bytes) {
        for (long j = 0; j < n; j++) {
            float* c = y + j * m;
            long i = 0;
            while (i < m && ((uintptr_t)(c + i) & 15)) {
                c[i] = b[i];
                i++;
            }
            for (; i + 4 <= m; i += 4) _mm_stream_ps(c + i, _mm_loadu_ps(b + i));
            for (; i < m; i++) c[i] = b[i];
        }
        _mm_sfence();
        return;
    }
#endif
    for (long j = 0; j < n; j++) memcpy(y + j * m, b, (size_t)m * sizeof(float));
}

/* log sum e^x over n >= 1 entries as mx + ls: mx the largest entry, ls the
 * log of the shifted sum (kept apart, ls keeps its digits when |mx| is
 * large). Two vector passes, the sum in float lanes (n = 10^4: ~1e-6). */
DYN_CLONES_FM static void dyn_logsumexp_f32(const float* x, long n, float* mx_out, float* ls_out) {
    float mx = x[0], s = 0.0f;
    long i;
#pragma omp simd reduction(max:mx)
    for (i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
#pragma omp simd reduction(+:s)
    for (i = 0; i < n; i++) s += dyn_expf_neg(x[i] - mx);
    *mx_out = mx;
    *ls_out = (float)log((double)s);
}

/* gx += c * softmax(x), softmax(x) = e^((x - mx) - ls) from dyn_logsumexp_f32:
 * recomputed from x rather than kept (an exp costs less than the traffic). */
DYN_CLONES_FM static void dyn_softmax_acc_f32(float* gx, const float* x, long n, float mx, float ls,
                                             float c) {
    for (long i = 0; i < n; i++) gx[i] += c * dyn_expf_neg((x[i] - mx) - ls);
}

/* gx = c * softmax(x): the same, into memory that holds nothing yet (not read) */
DYN_CLONES_FM static void dyn_softmax_set_f32(float* gx, const float* x, long n, float mx, float ls,
                                             float c) {
    for (long i = 0; i < n; i++) gx[i] = c * dyn_expf_neg((x[i] - mx) - ls);
}
#endif
