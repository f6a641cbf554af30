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
 * 1e-26, so flushing it changes no result a user can see. TensorFlow runs
 * all its kernels this way. */
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

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define DYN_CLONES_OPT __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DYN_CLONES_OPT
#endif

/* Adam on n elements: gi = g gs + l2 w; m += (1 - b1)(gi - m);
 * v += (1 - b2)(gi^2 - v); w = (w - alpha m / (sqrt(v) + eps)) d; g = 0.
 * The moments are written as m + c (gi - m) so that the float32 constants
 * c1 = 1 - b1, c2 = 1 - b2 carry b1, b2 to double precision. */
DYN_CLONES_OPT static void dyn_adam_f32(float* restrict w, float* restrict g, float* restrict m,
                                        float* restrict v, long n, float gs, float l2, float c1,
                                        float c2, float alpha, float eps, float d) {
    for (long i = 0; i < n; i++) {
        float gi = g[i] * gs + l2 * w[i];
        float mi = m[i] + c1 * (gi - m[i]);
        float vi = v[i] + c2 * (gi * gi - v[i]);
        m[i] = mi;
        v[i] = vi;
        w[i] = (w[i] - alpha * mi / (sqrtf(vi) + eps)) * d;
        g[i] = 0.0f;
    }
}

/* The same step on elements whose gradient is known to be zero (the rows of a
 * lookup table that no lookup touched, in a dense step): gi = l2 w, and the
 * gradient buffer is neither read nor cleared. Six streams instead of eight;
 * the results are bitwise those of dyn_adam_f32 with g = 0. */
DYN_CLONES_OPT static void dyn_adam_f32_nograd(float* restrict w, float* restrict m,
                                               float* restrict v, long n, float l2, float c1,
                                               float c2, float alpha, float eps, float d) {
    for (long i = 0; i < n; i++) {
        float gi = l2 * w[i];
        float mi = m[i] + c1 * (gi - m[i]);
        float vi = v[i] + c2 * (gi * gi - v[i]);
        m[i] = mi;
        v[i] = vi;
        w[i] = (w[i] - alpha * mi / (sqrtf(vi) + eps)) * d;
    }
}
/* sum a[j] b[j] over n doubles, in vector lanes (the lazy Adam catch-up's
 * interval sums, src/_k_catchup.pyx). */
DYN_CLONES_OPT static double dyn_dot_f64(const double* restrict a, const double* restrict b, long n) {
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (long j = 0; j < n; j++) s += a[j] * b[j];
    return s;
}
#endif
