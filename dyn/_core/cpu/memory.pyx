# cython: language_level=3, boundscheck=False, wraparound=False
"""The CPU device: value memory from malloc (64-byte aligned), cleared, copied, gathered and
scatter-added by compiled loops. It registers itself as "CPU" (the interface and the registry of
devices: dyn/_core/core/device.pxd)."""
from libc.stdlib cimport malloc, free
from libc.string cimport memset, memcpy, strncpy
from libc.stdint cimport uintptr_t
from libc.math cimport isfinite
from dyn._core.cpu cimport blas as _blas
from dyn._core.core.types cimport real
from dyn._core.core.device cimport Device, register_device, ALIGN



cdef void* _cpu_alloc(size_t nbytes) noexcept nogil:
    # malloc'd blocks are 16-byte aligned: over-allocate and keep the raw pointer just before
    cdef char* raw = <char*>malloc(nbytes + ALIGN + sizeof(void*))
    if raw == NULL:
        return NULL
    cdef uintptr_t p = (<uintptr_t>raw + sizeof(void*) + ALIGN - 1) & ~(<uintptr_t>ALIGN - 1)
    (<void**>p)[-1] = raw
    return <void*>p


cdef void _cpu_release(void* p) noexcept nogil:
    if p != NULL:
        free((<void**>p)[-1])


cdef void _cpu_zero(void* p, size_t nbytes) noexcept nogil:
    if nbytes:
        memset(p, 0, nbytes)


cdef void _cpu_copy(void* dst, const void* src, size_t nbytes) noexcept nogil:
    if nbytes:
        memcpy(dst, src, nbytes)


cdef void _cpu_gather(char* dst, char** srcs, const long* lens, int m, int isz) noexcept nogil:
    cdef int j
    cdef size_t o = 0
    for j in range(m):
        memcpy(dst + o, srcs[j], <size_t>lens[j] * isz)
        o += <size_t>lens[j] * isz


cdef void _cpu_scatter_add(char** dsts, const char* src, const long* lens, int m, int dtype) noexcept nogil:
    cdef int j, isz = 4 if dtype == 0 else 8
    cdef size_t o = 0
    for j in range(m):
        if dsts[j] != NULL:
            _blas.vadd(dtype, lens[j], <void*>(src + o), dsts[j])
        o += <size_t>lens[j] * isz


cdef void _cpu_add_scalar(void* p, double v, int dtype) noexcept nogil:
    if dtype == 0:
        (<float*>p)[0] += <float>v
    else:
        (<double*>p)[0] += v


cdef long _first_nonfinite(const real* p, long n) noexcept nogil:
    cdef long k
    for k in range(n):
        if not isfinite(p[k]):
            return k
    return -1


cdef long _cpu_find_nonfinite(const void* p, long n, int dtype) noexcept nogil:
    if dtype == 0:
        return _first_nonfinite(<const float*>p, n)
    return _first_nonfinite(<const double*>p, n)


cdef Device CPU


cdef Device* cpu_device() noexcept nogil:
    return &CPU


CPU.kind = 0
strncpy(CPU.name, b"CPU", 15)
CPU.alloc = _cpu_alloc
CPU.release = _cpu_release
CPU.zero = _cpu_zero
CPU.copy = _cpu_copy
CPU.to_host = _cpu_copy
CPU.from_host = _cpu_copy
CPU.gather = _cpu_gather
CPU.scatter_add = _cpu_scatter_add
CPU.add_scalar = _cpu_add_scalar
CPU.find_nonfinite = _cpu_find_nonfinite
CPU.lazy = 1

register_device("CPU", &CPU)


def _host(a):
    return a


# the parameter pool's memory: numpy arrays, which are already host arrays
from dyn._core.core.device import register_arrays  # noqa: E402
import numpy as _np  # noqa: E402
register_arrays("CPU", _np.zeros, _host, _host, _np.add.at)
