"""The GPU device's backends: where its memory lives and which array library runs its kernels.

`CupyBackend` is the real one: memory from cupy's device allocator (the arenas are a few large
blocks, so the steady state makes no device allocation), views over it as cupy arrays, copies
on the current stream, cuBLAS products and compiled elementwise kernels through cupy.

`StandIn` runs the same kernels and the same code paths on the CPU with numpy arrays where cupy's
would be: the memory is host memory, but every access goes through this interface exactly as on
the GPU (the parameter pool's host view is a copy, as the GPU's is), and it records what the GPU
would do (allocations, kernel launches, copies back) so tests can check, without a GPU, that a
graph makes no allocation per node and no copy back per op.
"""
import ctypes

import numpy as np

ALIGN = 64


VIEW_CACHE = 1 << 16    # arrays over device memory kept by wrap (a graph's worth, many times over)


class _Backend:
    """What both backends do the same way through their array module (self.xp, with self.wrap
    giving an array over device memory), and the record of what the device was asked to do:
    allocations, kernel launches, copies (the tests read it).

    wrap(ptr, shape, dtype) keeps the arrays it makes, by address, shape and type: a kernel asks
    for the same views graph after graph (the arenas give a repeated graph the same offsets), and
    making a cupy array over raw memory costs several Python objects. An array over an address
    owns nothing, so a kept one is the array a new call would make; kernels never change an
    array's shape in place. Releasing a block or allocating arrays drops them all (bounded
    memory, and no array outlives the memory it was made over)."""

    def wrap(self, ptr, shape, dtype):
        key = (ptr, shape, dtype)
        try:
            return self._views[key]
        except KeyError:
            pass
        except TypeError:                   # a shape that is not a tuple: made, not kept
            return self._new_view(ptr, tuple(shape), dtype)
        a = self._new_view(ptr, shape, dtype)
        if ptr and a.size:                  # (no memory: a new zeros array each time)
            if len(self._views) >= VIEW_CACHE:
                self._views.clear()
            self._views[key] = a
        return a

    def release(self, p):
        """Free the block at p (alloc's): the arrays wrap kept go with it."""
        self._views.clear()
        self.blocks.pop(p, None)

    def _reset_counters(self):
        self.allocs = 0          # device blocks allocated (arena blocks, pool arrays)
        self.launches = 0        # kernels run (one per node's forward or backward call)
        self.to_host_copies = 0  # copies back to the host: the only synchronising calls
        self.from_host_copies = 0

    def counters(self):
        return {"allocs": self.allocs, "launches": self.launches,
                "to_host_copies": self.to_host_copies, "from_host_copies": self.from_host_copies}

    def scatter_add(self, dsts, src, lens, dtype):
        dt = _dt(dtype)
        o = 0
        for d, n in zip(dsts, lens):
            if d and n:
                t = self.wrap(d, (n,), dt)
                t += self.wrap(src + o * dt().itemsize, (n,), dt)
            o += n

    def add_scalar(self, p, v, dtype):
        t = self.wrap(p, (1,), _dt(dtype))
        t += v

    def find_nonfinite(self, p, n, dtype):
        self.to_host_copies += 1
        bad = self.xp.flatnonzero(~self.xp.isfinite(self.wrap(p, (n,), _dt(dtype))))
        return int(bad[0]) if len(bad) else -1

    # arrays (the parameter pool, the trainers' state)
    def zeros(self, n, dtype):
        self.allocs += 1
        self._views.clear()
        return self.xp.zeros(n, dtype)

    def asarray(self, a, dtype=None):
        return self.xp.asarray(a, dtype=dtype)

    # kernels' helpers
    def scatter_add_rows(self, table, rows, vals):
        """table[rows[k]] += vals[k] for each k, repeated rows adding up (table: rows first)."""
        self.xp.add.at(table, self.xp.asarray(rows), vals)


def _dt(dtype):
    return np.float32 if dtype == 0 else np.float64


class StandIn(_Backend):
    """numpy standing where cupy would: the GPU device's code paths, run on the CPU."""

    name = "stand-in (numpy on the CPU)"
    is_gpu = False

    def __init__(self):
        self.xp = np
        self.blocks = {}
        self._views = {}
        self._reset_counters()
        self.rng = np.random.default_rng(0x5EED)
        from dyn._core.gpu.device import host_view
        self._view = host_view

    # memory
    def alloc(self, nbytes):
        raw = np.empty(nbytes + ALIGN, np.uint8)
        p = (raw.ctypes.data + ALIGN - 1) // ALIGN * ALIGN
        self.blocks[p] = raw
        self.allocs += 1
        return p

    def _new_view(self, ptr, shape, dtype):
        return self._view(ptr, shape, dtype)

    def zero(self, p, n):
        ctypes.memset(p, 0, n)

    def copy(self, dst, src, n):
        ctypes.memmove(dst, src, n)

    def to_host(self, host, src, n):
        self.to_host_copies += 1
        ctypes.memmove(host, src, n)

    def from_host(self, dst, host, n):
        self.from_host_copies += 1
        ctypes.memmove(dst, host, n)

    def gather(self, dst, srcs, lens, isz):
        o = 0
        for s, n in zip(srcs, lens):
            ctypes.memmove(dst + o, s, n * isz)
            o += n * isz

    def to_host_array(self, a):
        self.to_host_copies += 1
        return np.array(a)        # a copy, as the GPU's: host code must not write through it

    def asnumpy(self, a):
        return np.asarray(a)

    def synchronize(self):
        pass

    def seed(self, s):
        self.rng = np.random.default_rng(s)

    def uniform(self, shape, dtype):
        """Uniform in (0, 1)."""
        u = self.rng.random(shape)
        u[u == 0] = 0.5
        return u.astype(dtype)

    def normal(self, shape, dtype):
        return self.rng.standard_normal(shape).astype(dtype)

    def info(self):
        return {"name": self.name, "memory_used": sum(b.nbytes for b in self.blocks.values())}


class CupyBackend(_Backend):
    """A CUDA GPU through cupy."""

    is_gpu = True

    def __init__(self, device_id=0):
        import cupy
        self.cp = cupy
        self.xp = cupy
        self.device_id = device_id
        self.dev = cupy.cuda.Device(device_id)
        self.dev.use()
        cupy.zeros(1)             # raises here when there is no usable GPU
        props = cupy.cuda.runtime.getDeviceProperties(device_id)
        self.name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        self.blocks = {}
        self._views = {}
        self._reset_counters()
        self.rng = cupy.random.RandomState(0x5EED)
        rt = cupy.cuda.runtime
        self._rt = rt
        self._memcpy_async = rt.memcpyAsync
        self._memset_async = rt.memsetAsync

    def _stream(self):
        return self.cp.cuda.get_current_stream().ptr

    # memory
    def alloc(self, nbytes):
        mem = self.cp.cuda.alloc(nbytes)       # cupy's pool: 512-byte aligned
        self.blocks[mem.ptr] = mem
        self.allocs += 1
        return mem.ptr

    def _new_view(self, ptr, shape, dtype):
        cp = self.cp
        n = 1
        for s in shape:
            n *= s
        dt = np.dtype(dtype)
        if n == 0 or ptr == 0:
            return cp.zeros(shape, dt, order="F")
        mem = cp.cuda.UnownedMemory(ptr, n * dt.itemsize, self, self.device_id)
        flat = cp.ndarray((n,), dt, cp.cuda.MemoryPointer(mem, 0))
        return flat.reshape(shape, order="F")

    def zero(self, p, n):
        self._memset_async(p, 0, n, self._stream())

    def copy(self, dst, src, n):
        self._memcpy_async(dst, src, n, self._rt.memcpyDeviceToDevice, self._stream())

    def to_host(self, host, src, n):
        self.to_host_copies += 1
        self._memcpy_async(host, src, n, self._rt.memcpyDeviceToHost, self._stream())
        self.cp.cuda.get_current_stream().synchronize()

    def from_host(self, dst, host, n):
        # from pageable memory the copy is staged before the call returns: the host buffer may go
        self.from_host_copies += 1
        self._memcpy_async(dst, host, n, self._rt.memcpyHostToDevice, self._stream())

    def gather(self, dst, srcs, lens, isz):
        o = 0
        s = self._stream()
        for src, n in zip(srcs, lens):
            if n:
                self._memcpy_async(dst + o, src, n * isz, self._rt.memcpyDeviceToDevice, s)
            o += n * isz

    def to_host_array(self, a):
        self.to_host_copies += 1
        return self.cp.asnumpy(a)

    def asnumpy(self, a):
        return self.cp.asnumpy(a)

    def synchronize(self):
        self.cp.cuda.get_current_stream().synchronize()

    def seed(self, s):
        self.rng = self.cp.random.RandomState(s)

    def uniform(self, shape, dtype):
        u = self.rng.random_sample(shape, dtype=np.float64)
        return self.cp.where(u == 0, 0.5, u).astype(dtype)     # (a masked store would synchronise)

    def normal(self, shape, dtype):
        return self.rng.standard_normal(shape, dtype=np.float64).astype(dtype)

    def info(self):
        free, total = self.cp.cuda.runtime.memGetInfo()
        pool = self.cp.get_default_memory_pool()
        return {"name": self.name, "memory_free": free, "memory_total": total,
                "memory_used": pool.used_bytes(), "memory_pool": pool.total_bytes()}
