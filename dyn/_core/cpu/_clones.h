/* DYN_TARGET_CLONES: a loop compiled three times, for AVX-512, for AVX2 with
 * FMA (x86-64-v3) and for the x86-64 baseline; the loader runs the best the
 * machine has (GCC's target_clones).
 *
 * The middle clone is named by its ISA level, "arch=x86-64-v3" (GCC 12 and
 * later), not by "avx2" or "arch=haswell": "avx2" alone leaves out FMA, so
 * every a + b * c is a multiply and an add (slower, and rounded twice), and a
 * clone named "arch=haswell" is chosen only on a CPU that *is* a Haswell, so
 * an AMD EPYC (Zen 3) ran the baseline SSE2 clone. Older GCCs get "avx2". */
#ifndef DYN_CLONES_H
#define DYN_CLONES_H

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#if __GNUC__ >= 12
#define DYN_TARGET_CLONES __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default")))
#else
#define DYN_TARGET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#else
#define DYN_TARGET_CLONES
#endif

#endif
