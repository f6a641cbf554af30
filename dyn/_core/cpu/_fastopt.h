/* Optimizer update loops over float32 pool buffers, compiled per instruction
 * set (AVX-512, AVX2, baseline) and chosen when the module loads: a dense
 * step over a large softmax layer is bound by memory traffic, so it must run
 * as one vector pass that reads value, gradient and state once. */
#ifndef DYN_FASTOPT_H
#define DYN_FASTOPT_H
#include <math.h>
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#endif

/* Denormal numbers are flushed to zero inside the optimizer loops (FTZ and
 * DAZ set for the loop, the caller's mode restored after). A lookup row that
 * stays idle under a dense Adam step sees its first moment decay by beta_1
 * each step into the denormal range (below 1.2e-38 after ~800 steps), and
 * x86 cores take a microcode assist on every such operand: in the BiLSTM
 * tagger 29% of the table's moments were denormal and the dense step ran
 * 3x slower. A moment that small moves a weight by at most
 * alpha * 1.2e-38 / eps, far below float32 resolution of any weight above
 * 1e-26, so flushing it changes no result a user can see. TensorFlow sets
 * the same mode for its kernels. */
static inline unsigned dyn_ftz_begin(void) {
#if defined(__SSE__) || defined(__x86_64__)
    unsigned old = _mm_getcsr();
    _mm_setcsr(old | 0x8040u); /* FTZ (bit 15) | DAZ (bit 6) */
    return old;
#else
    return 0;
#endif
}

static inline void dyn_ftz_end(unsigned old) {
#if defined(__SSE__) || defined(__x86_64__)
    _mm_setcsr(old);
#else
    (void)old;
#endif
}

#include "_clones.h"
#define DYN_CLONES_OPT DYN_TARGET_CLONES

#if defined(__GNUC__)
#define DYN_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define DYN_ALWAYS_INLINE inline
#endif

/* One element of Adam from its gradient gi: m += (1 - b1)(gi - m);
 * v += (1 - b2)(gi^2 - v); returns the new w = (w - alpha m / (sqrt(v) + eps)) d.
 * The moments are written as m + c (gi - m) so that the float32 constants
 * c1 = 1 - b1, c2 = 1 - b2 carry b1, b2 to double precision. */
static DYN_ALWAYS_INLINE float dyn_adam_elem_f32(float gi, float w, float* restrict m, float* restrict v,
                                                 float c1, float c2, float alpha, float eps, float d) {
    float mi = *m + c1 * (gi - *m);
    float vi = *v + c2 * (gi * gi - *v);
    *m = mi;
    *v = vi;
    return (w - alpha * mi / (sqrtf(vi) + eps)) * d;
}

/* dyn_adam_elem_f32 with d = 1: the same arithmetic without the last multiplication. */
static DYN_ALWAYS_INLINE float dyn_adam_elem1_f32(float gi, float w, float* restrict m, float* restrict v,
                                                  float c1, float c2, float alpha, float eps) {
    float mi = *m + c1 * (gi - *m);
    float vi = *v + c2 * (gi * gi - *v);
    *m = mi;
    *v = vi;
    return w - alpha * mi / (sqrtf(vi) + eps);
}

/* A step's gradient: g gs, plus l2 w with L2 regularisation only (without it, an infinite weight
 * does not make the moments NaN through 0 w; optim.pyx's _grad, the GPU's step too). */
static DYN_ALWAYS_INLINE float dyn_adam_grad(float g, float gs, float l2, float w) {
    return l2 != 0.0f ? g * gs + l2 * w : g * gs;
}

/* Whether a step's gradient is the gradient itself and its weights are not decayed (gs = 1, no
 * L2 regularisation, d = 1: no clipping, no weight decay): then the loops leave out gs, l2 w and
 * d, whose multiplications cost as much as the step's other arithmetic but the root and the
 * division; the numbers are the same (g 1 is g, x 1 is x). */
static int dyn_adam_plain_on = 1;   /* (per module: optim._set_adam_plain and blas._set_adam_plain) */

static DYN_ALWAYS_INLINE int dyn_adam_plain(float gs, float l2, float d) {
    return dyn_adam_plain_on && gs == 1.0f && l2 == 0.0f && d == 1.0f;
}

static int dyn_adam_still = 1;   /* the still-stretch shortcuts on (the hook optim._set_adam_still) */

/* Adam on n elements [i0, i1) with gradient gi = g gs + l2 w; g is cleared. */
DYN_ALWAYS_INLINE void dyn_adam_span(float* restrict w, float* restrict g, float* restrict m,
                                     float* restrict v, long i0, long i1, float gs, float l2, float c1,
                                     float c2, float alpha, float eps, float d) {
    if (dyn_adam_plain(gs, l2, d)) {
        for (long i = i0; i < i1; i++) {
            w[i] = dyn_adam_elem1_f32(g[i], w[i], m + i, v + i, c1, c2, alpha, eps);
            g[i] = 0.0f;
        }
        return;
    }
    for (long i = i0; i < i1; i++) {
        w[i] = dyn_adam_elem_f32(dyn_adam_grad(g[i], gs, l2, w[i]), w[i], m + i, v + i, c1, c2, alpha, eps, d);
        g[i] = 0.0f;
    }
}

/* Whether all of g[0..n) and m[0..n) are +0.0 (their bits zero) and w[0..n), v[0..n) finite. */
DYN_ALWAYS_INLINE int dyn_adam_zero_still(const float* restrict w, const float* restrict g,
                                          const float* restrict m, const float* restrict v, long n) {
    const unsigned* gb = (const unsigned*)g;
    const unsigned* mb = (const unsigned*)m;
    unsigned bits = 0;
    int finite = 1;
    for (long j = 0; j < n; j++) {
        bits |= gb[j] | mb[j];
        finite &= (w[j] - w[j] == 0.0f) & (v[j] - v[j] == 0.0f);
    }
    return bits == 0 && finite;
}

/* Adam on n elements with gradient gi = g gs + l2 w; g is cleared.
 *
 * Without L2 regularisation an element whose gradient and first moment are both zero keeps its
 * first moment and weight (alpha 0 / (sqrt(v) + eps) = 0): only v decays, and w by DyNet's weight
 * decay d. Such elements are a weight's rows or columns that nothing in the graph reads, e.g. an
 * N-ary Tree-LSTM's forget-gate rows of W_x (2H of its (3 + N)H rows at N = 2), which leaves never
 * compute. Stretches of 64 of them (gradient and moment +0.0, weight and v finite) skip the square
 * root and the division that bound this loop while the parameter is in cache, and write neither m
 * nor g (already +0.0) nor, at d = 1, w; the first gradient entry of a stretch decides whether the
 * others are looked at, so a stretch with a gradient costs one comparison more. The results are
 * bitwise the full step's (v's update is the same expression with a zero gradient, as in
 * dyn_adam_f32_nograd). */
DYN_CLONES_OPT static void dyn_adam_f32(float* restrict w, float* restrict g, float* restrict m,
                                        float* restrict v, long n, float gs, float l2, float c1,
                                        float c2, float alpha, float eps, float d) {
    const long S = 64;
    long i = 0;
    if (l2 == 0.0f && dyn_adam_still) {
        for (; i + S <= n; i += S) {
            if (*(const unsigned*)(g + i) != 0 || !dyn_adam_zero_still(w + i, g + i, m + i, v + i, S)) {
                dyn_adam_span(w, g, m, v, i, i + S, gs, l2, c1, c2, alpha, eps, d);
                continue;
            }
            float* restrict vi = v + i;
            for (long j = 0; j < S; j++) vi[j] = vi[j] + c2 * (0.0f * 0.0f - vi[j]);
            if (d != 1.0f) {
                float* restrict wi = w + i;
                for (long j = 0; j < S; j++) wi[j] = (wi[j] - 0.0f) * d;
            }
        }
    }
    dyn_adam_span(w, g, m, v, i, n, gs, l2, c1, c2, alpha, eps, d);
}

/* Whether any element of w[0..n), m[0..n), v[0..n) makes a step move: m nonzero, w or v not finite. */
static DYN_ALWAYS_INLINE int dyn_adam_moving(const float* restrict w, const float* restrict m,
                                             const float* restrict v, long n) {
    int moving = 0;
    for (long j = 0; j < n; j++)
        moving |= (m[j] != 0.0f) | !(w[j] - w[j] == 0.0f) | !(v[j] - v[j] == 0.0f);
    return moving;
}

/* The same step on elements whose gradient is known to be zero (the rows of a
 * lookup table that no lookup touched, in a dense step): gi = l2 w, and the
 * gradient buffer is neither read nor cleared. Six streams instead of eight;
 * the results are bitwise those of dyn_adam_f32 with g = 0. */
DYN_CLONES_OPT static void dyn_adam_f32_nograd(float* restrict w, float* restrict m,
                                               float* restrict v, long n, float l2, float c1,
                                               float c2, float alpha, float eps, float d) {
    /* Without L2 regularisation (l2 = 0) an element whose first moment is zero (a row never
     * used yet, or idle long enough for it to be flushed: see dyn_ftz_begin) keeps it at zero,
     * and its weight moves by alpha 0 / (sqrt(v) + eps) = 0: only v decays (and w by DyNet's
     * weight decay d). Stretches of 64 such elements, with finite w and v, skip the square root
     * and the division that bound this loop while the table is in cache, and write neither m
     * nor (d = 1) w; the results are bitwise the full step's (v's update is the same expression
     * with a zero gradient). */
    const long S = 64;
    long i = 0;
    if (l2 == 0.0f && dyn_adam_still) {
        for (; i + S <= n; i += S) {
            float* restrict wi = w + i;
            float* restrict mi = m + i;
            float* restrict vi = v + i;
            if (dyn_adam_moving(wi, mi, vi, S)) {
                if (dyn_adam_plain(1.0f, l2, d))   /* (0 w is 0 for a finite w, x 1 is x) */
                    for (long j = 0; j < S; j++)
                        wi[j] = dyn_adam_elem1_f32(0.0f, wi[j], mi + j, vi + j, c1, c2, alpha, eps);
                else
                    for (long j = 0; j < S; j++)
                        wi[j] = dyn_adam_elem_f32(dyn_adam_grad(0.0f, 1.0f, l2, wi[j]), wi[j], mi + j, vi + j, c1,
                                                  c2, alpha, eps, d);
                continue;
            }
            for (long j = 0; j < S; j++) vi[j] = vi[j] + c2 * (0.0f * 0.0f - vi[j]);
            if (d != 1.0f)
                for (long j = 0; j < S; j++) wi[j] = (wi[j] - 0.0f) * d;
        }
    }
    if (dyn_adam_plain(1.0f, l2, d))
        for (; i < n; i++) w[i] = dyn_adam_elem1_f32(0.0f, w[i], m + i, v + i, c1, c2, alpha, eps);
    else
        for (; i < n; i++)
            w[i] = dyn_adam_elem_f32(dyn_adam_grad(0.0f, 1.0f, l2, w[i]), w[i], m + i, v + i, c1, c2, alpha, eps, d);
}

/* sum a[j] b[j] over n doubles, in vector lanes (the lazy Adam catch-up's
 * interval sums, dyn/_core/train/catchup.pyx). */
DYN_CLONES_OPT static double dyn_dot_f64(const double* restrict a, const double* restrict b, long n) {
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (long j = 0; j < n; j++) s += a[j] * b[j];
    return s;
}
/* The lazy Adam catch-up of one float32 row (dyn/_core/train/catchup.pyx, whose
 * scalar loop this vectorises; the arithmetic per element is that of _adam_idle_sum).
 *
 * dyn_adam_catchup_range_f32: over the elements with m != 0, the smallest
 * sqrt(v) that is >= thrA (series A) and the largest that is <= thrB
 * (series B); -1 where there is none. a0 (n doubles, or 0): every element's
 * sqrt(v), for dyn_adam_catchup_a_f32. */
DYN_CLONES_OPT static void dyn_adam_catchup_range_f32(const float* restrict v, const float* restrict m,
                                                     int n, double thrA, double thrB, double* minA,
                                                     double* maxB, double* restrict a0) {
    double lo = 1e300, hi = -1.0;
#pragma omp simd reduction(min : lo) reduction(max : hi)
    for (int i = 0; i < n; i++) {
        double r = sqrt((double)v[i]);
        int on = m[i] != 0.0f;
        double ca = (on && r >= thrA) ? r : 1e300;
        double cb = (on && r <= thrB) ? r : -1.0;
        lo = ca < lo ? ca : lo;
        hi = cb > hi ? cb : hi;
        if (a0) a0[i] = r;
    }
    *minA = lo < 1e300 ? lo : -1.0;
    *maxB = hi;
}

/* acc[i] = the idle-step sum of element i under series A, for every element with
 * m != 0 and a0 = sqrt(v) >= thrA (sum_n S[n] (-eps/a0)^n / a0, Horner); 0 where
 * m == 0. acc holds each element's a0 on entry (dyn_adam_catchup_range_f32's) and
 * is overwritten. Returns how many elements are in neither case: their acc is
 * left for the caller's scalar pass (series B or the step-by-step replay).
 * Eight elements at a time, the Horner steps across them (one vector operation
 * each), 1 / a0 once per element; the last n % 8 in one more pass over a block
 * that ends at n, whose elements already done are not written again. */
typedef double dyn_v8d __attribute__((vector_size(64)));
typedef double dyn_v8du __attribute__((vector_size(64), aligned(8)));
typedef long dyn_v8l __attribute__((vector_size(64)));

DYN_ALWAYS_INLINE int dyn_adam_catchup_a8(const float* restrict m, const double* restrict S, int nS,
                                          double eps, double thrA, double* acc, int i0, int from) {
    dyn_v8d a = *(const dyn_v8du*)(acc + i0);
    dyn_v8d r = 1.0 / a;
    dyn_v8d y = eps * r;
    dyn_v8d h = (dyn_v8d){0} + (nS > 0 ? S[nS - 1] : 0.0);
    for (int j = nS - 2; j >= 0; j--) h = S[j] - y * h;
    dyn_v8d out = h * r;
    int rest = 0;
    for (int l = 0; l < 8; l++) {      /* (lanes before from: done by the block before) */
        int on = m[i0 + l] != 0.0f;
        int isA = on && a[l] >= thrA;
        if (l >= from) {
            acc[i0 + l] = isA ? out[l] : 0.0;
            rest += on && !isA;
        }
    }
    return rest;
}

DYN_CLONES_OPT static int dyn_adam_catchup_a_f32(const float* restrict m, int n, const double* restrict S,
                                                int nS, double eps, double thrA, double* acc) {
    int rest = 0, i = 0;
    for (; i + 8 <= n; i += 8) rest += dyn_adam_catchup_a8(m, S, nS, eps, thrA, acc, i, 0);
    if (i < n) {
        if (n >= 8) {
            rest += dyn_adam_catchup_a8(m, S, nS, eps, thrA, acc, n - 8, 8 - (n - i));
        } else {                     /* a row of fewer than eight elements */
            double a[8] __attribute__((aligned(64))) = {1, 1, 1, 1, 1, 1, 1, 1};
            float mm[8] = {0};
            for (int l = 0; l < n; l++) { a[l] = acc[l]; mm[l] = m[l]; }
            rest = dyn_adam_catchup_a8(mm, S, nS, eps, thrA, a, 0, 0);
            for (int l = 0; l < n; l++) acc[l] = a[l];
        }
    }
    return rest;
}

/* w = w D - m acc; m *= P1; v *= P2 (in double, stored to float). */
DYN_CLONES_OPT static void dyn_adam_catchup_apply_f32(float* restrict w, float* restrict m,
                                                     float* restrict v, int n,
                                                     const double* restrict acc, double D, double P1,
                                                     double P2) {
#pragma omp simd
    for (int i = 0; i < n; i++) {
        double m0 = m[i];
        w[i] = (float)(w[i] * D - m0 * acc[i]);
        m[i] = (float)(m0 * P1);
        v[i] = (float)(v[i] * P2);
    }
}
#endif
