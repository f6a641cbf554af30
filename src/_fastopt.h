/* Optimizer update loops over float32 pool buffers, compiled per instruction
 * set (AVX-512, AVX2, baseline) and chosen when the module loads: a dense
 * step over a large softmax layer is bound by memory traffic, so it must run
 * as one vector pass that reads value, gradient and state once. */
#ifndef DYN_FASTOPT_H
#define DYN_FASTOPT_H
#include <math.h>

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
#endif
