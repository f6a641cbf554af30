/* A cheap monotonic tick counter for timing many short intervals: the TSC on x86 (a few
   nanoseconds a read, against clock_gettime's tens), nanoseconds from clock_gettime elsewhere.
   Callers convert ticks to seconds with a clock_gettime interval measured over the same span. */
#ifndef DYN_TICKS_H
#define DYN_TICKS_H
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline unsigned long long dyn_ticks(void) { return __rdtsc(); }
#else
static inline unsigned long long dyn_ticks(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long long)t.tv_sec * 1000000000ULL + (unsigned long long)t.tv_nsec;
}
#endif
#endif
