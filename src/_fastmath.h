/* Vectorisable float32 exp/tanh/logistic for dyn's elementwise kernels.
 * exp: x = n ln2 + r with |r| <= ln2/2 (ln2 split in two for exactness),
 * e^r by its degree-6 Taylor polynomial (error < 1.2e-7 relative), 2^n
 * assembled in the exponent bits. Plain float arithmetic and an int
 * conversion: GCC vectorises loops over these (SSE2 and up). */
#ifndef DYN_FASTMATH_H
#define DYN_FASTMATH_H
#include <stdint.h>
#include <string.h>

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

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define DYN_CLONES_FM __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DYN_CLONES_FM
#endif

/* loops compiled per instruction set, chosen when the module loads */
DYN_CLONES_FM static void dyn_tanh_f32(float* y, const float* x, long n) {
    for (long i = 0; i < n; i++) y[i] = dyn_tanhf(x[i]);
}
DYN_CLONES_FM static void dyn_logistic_f32(float* y, const float* x, long n) {
    for (long i = 0; i < n; i++) y[i] = dyn_logisticf(x[i]);
}
#endif
