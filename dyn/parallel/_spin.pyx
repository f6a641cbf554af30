# cython: language_level=3, boundscheck=False, wraparound=False
"""Acquire/release flag operations on shared memory, for dyn.parallel's barrier.

Worker processes forked on one machine meet at a barrier several times a step
(synchronous training). multiprocessing's Barrier goes through semaphores and
Python code (about 100 us a meeting here); a barrier over flags in shared
memory that the waiter polls costs a few microseconds when every worker has a
core. The flags are written with release and read with acquire semantics, so
whatever a process wrote to shared memory before arriving is visible to every
process that saw it arrive (on any CPU, not only x86's ordered stores).

Layout of ``words`` (int64, in memory shared by the processes): ``words[0]``
is the abort flag, ``words[STRIDE * (r + 1)]`` the last generation rank r
arrived at (one 64-byte line each, so the ranks do not write one line).
"""

cdef extern from *:
    """
    static inline long long dyn_load_acquire(long long *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
    static inline void dyn_store_release(long long *p, long long v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
    static inline void dyn_cpu_relax(void) {
    #if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
    #elif defined(__aarch64__)
        __asm__ __volatile__("yield");
    #endif
    }
    """
    long long dyn_load_acquire(long long *p) nogil
    void dyn_store_release(long long *p, long long v) nogil
    void dyn_cpu_relax() nogil

cdef int STRIDE_C = 8  # int64 words per rank: one cache line
STRIDE = STRIDE_C


def words_needed(int size):
    """The int64 words a barrier of ``size`` processes needs."""
    return STRIDE_C * (size + 1)


def arrive(long long[::1] words, int rank, long long gen):
    """Publish that ``rank`` reached generation ``gen`` (after all its earlier writes)."""
    dyn_store_release(&words[STRIDE_C * (rank + 1)], gen)


def abort(long long[::1] words):
    """Break the barrier: every poll from now on returns -1."""
    dyn_store_release(&words[0], 1)


def poll(long long[::1] words, int size, long long gen, long spins):
    """Wait (spinning, without the GIL) up to ``spins`` rounds for every rank to reach ``gen``.

    Returns 1 when all have, -1 when the barrier was aborted, 0 when the spins ran out.
    """
    cdef int got
    with nogil:
        got = _poll(&words[0], size, gen, spins)
    return got


cdef int _poll(long long *words, int size, long long gen, long spins) noexcept nogil:
    cdef long i
    cdef int r
    cdef bint all_in
    for i in range(spins + 1):
        if dyn_load_acquire(&words[0]) != 0:
            return -1
        all_in = True
        for r in range(size):
            if dyn_load_acquire(&words[STRIDE_C * (r + 1)]) < gen:
                all_in = False
                break
        if all_in:
            return 1
        dyn_cpu_relax()
    return 0
