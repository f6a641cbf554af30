"""Shared memory for worker processes forked on one machine.

Everything here lives in anonymous shared mappings (``mmap.mmap(-1, n)``,
MAP_SHARED) made before the fork: the children inherit them, and a mapping
disappears with the last process that maps it, so no /dev/shm segment can be
left behind, whatever happens to the processes.

``LocalExchange`` is the synchronous transport between such processes: each
rank has a slot in a shared area, a collective writes the rank's data into its
slot, waits at a barrier and reads every slot. Two sets of slots alternate, so
a rank may write the next collective's data while a slower rank still reads
this one: one barrier per round instead of two. Sums are formed in rank order
on every rank, so every rank gets the same bits and the replicas stay equal.
"""

from __future__ import annotations

import mmap
import os
import threading
import time

import numpy as np

from dyn.parallel._exchange import Exchange
from dyn.parallel._sync import usable_cores


def shared_array(n, dtype):
    """A zeroed 1-D array of n elements in anonymous shared memory (kept by fork)."""
    dtype = np.dtype(dtype)
    buf = mmap.mmap(-1, max(int(n) * dtype.itemsize, 1))
    return np.frombuffer(buf, dtype=dtype, count=int(n))


def share_pools(model, trainer):
    """Move the values of the model's pools and the trainer's state arrays into
    shared memory (the gradients stay private to each process).

    Returns an undo function that moves them back into private memory.
    """
    from dyn.parallel._sync import model_params

    pools = []
    for p in model_params(model):
        if not any(p.pool is q for q in pools):
            pools.append(p.pool)
    for pool in pools:
        pool.adopt(shared_array(len(pool.values), pool.values.dtype), np.zeros_like(pool.grads))
    states = [trainer._state(p) for p in trainer._params()]
    for s in states:
        s.adopt_arrays([shared_array(a.size, a.dtype) for a in s.arrays])
    shared = [pool.values for pool in pools]

    def check():
        """Raise if a pool left its shared buffer (parameters were added since)."""
        if any(pool.values is not v for pool, v in zip(pools, shared)):
            raise RuntimeError(
                "dyn.parallel.train (async): parameters were created during training, so "
                "the parameter pool grew out of shared memory; create every parameter before "
                "calling train"
            )

    def undo():
        for pool in pools:
            if pool.values is not None:
                pool.adopt(np.zeros_like(pool.values), np.zeros_like(pool.grads))
        for s in states:
            s.adopt_arrays([np.zeros_like(a) for a in s.arrays])

    return check, undo


def _copy_range(parts, start, stop, dst):
    """Copy bytes [start, stop) of the concatenation of the uint8 arrays ``parts`` to the front of dst."""
    offset = 0
    for part in parts:
        lo, hi = max(start, offset), min(stop, offset + len(part))
        if lo < hi:
            dst[lo - start : hi - start] = part[lo - offset : hi - offset]
        offset += len(part)


class SpinBarrier:
    """A barrier for ``size`` processes forked from one parent, over flags in shared memory.

    Make it before forking; each process sets ``rank`` (the parent is 0) and
    calls ``wait()`` in the same sequence as the others. A waiter spins on the
    flags (without the GIL) while every process can have a core, then yields
    and sleeps, so oversubscribed workers do not steal the core of the one
    they wait for. ``abort()`` (any process, any thread) breaks the barrier:
    ``wait`` raises ``threading.BrokenBarrierError`` then and ever after, as
    ``multiprocessing.Barrier`` does.

    It also keeps each process's heartbeat, for the watcher that finds a
    worker making no progress: ``progress(rank)`` changes whenever that rank
    arrives at the barrier, calls ``beat()`` (once a step where a loop does
    not meet at the barrier every step) or is still waiting at the barrier
    (a waiter beats between its sleeps, so waiting for a slow peer is not
    mistaken for a stall).
    """

    def __init__(self, size):
        import dyn.parallel._spin as _spin

        self._spin = _spin
        self.size, self.rank, self.gen = int(size), 0, 0
        self.words = shared_array(_spin.words_needed(self.size), np.int64)
        self.beats = shared_array(_spin.STRIDE * self.size, np.int64)  # one cache line per rank
        # spin a little (2000 rounds of the CPU's pause: tens of microseconds) while the processes fit on
        # the cores; a long spin is ruinous when they do not (the one waited for may be off its core)
        self.spins = 2000 if self.size <= usable_cores() else 0

    def wait(self):
        self.gen += 1
        spin = self._spin
        spin.arrive(self.words, self.rank, self.gen)
        got = spin.poll(self.words, self.size, self.gen, self.spins)
        start = None
        while got == 0:  # the others are slow (or there are more processes than cores): give the core up
            now = time.perf_counter()
            start = now if start is None else start
            if now - start < 2e-3:
                os.sched_yield()
            else:  # a long wait (worker 0 running dev, say): sleep, and handle Ctrl-C between sleeps
                self.beat()  # alive and waiting, not stalled
                time.sleep(50e-6 if now - start < 1.0 else 1e-3)
            got = spin.poll(self.words, self.size, self.gen, 0)
        if got < 0:
            raise threading.BrokenBarrierError

    def beat(self):
        """Tell the watcher this process is making progress."""
        self.beats[self._spin.STRIDE * self.rank] += 1

    def progress(self, rank):
        """A value that changes whenever ``rank`` arrives here, beats or waits here."""
        stride = self._spin.STRIDE
        return int(self.words[stride * (rank + 1)]), int(self.beats[stride * rank])

    def abort(self):
        self._spin.abort(self.words)


class LocalExchange(Exchange):
    """Exchange between ``size`` processes forked from one parent.

    Make it in the parent with ``LocalExchange.create(size, slot_bytes, barrier)``
    before forking; each process then calls ``for_rank(rank)``.
    """

    def __init__(self, size, slot_bytes, barrier):
        self.size, self.rank = int(size), 0
        self.local_size = self.size  # every worker is forked on this machine
        self.cap = max(int(slot_bytes) // 8 * 8, 4096)
        self.barrier_ = barrier
        self.slots = shared_array(2 * self.size * self.cap, np.uint8).reshape(2, self.size, self.cap)
        self.phase = 0

    def for_rank(self, rank):
        self.rank = int(rank)
        return self

    def _wait(self):
        self.barrier_.wait()

    def _round(self, chunk):
        """Write this rank's bytes (at most cap) into the current slot set, wait for
        every rank; returns the slot set (read it before the next round)."""
        slots = self.slots[self.phase]
        slots[self.rank, : len(chunk)] = chunk
        self._wait()
        self.phase ^= 1
        return slots

    def _gather_bytes(self, parts):
        """Every rank's bytes (the concatenation of its uint8 ``parts``), in rank order.

        The first round carries each rank's length in its slot's first 8 bytes, so
        when everything fits (the usual case) one meeting does it and the result is
        views of the slots (valid until this rank's next collective but one: read
        them before then).
        """
        total = sum(len(p) for p in parts)
        room = self.cap - 8
        slots = self.slots[self.phase]
        slots[self.rank, :8].view(np.int64)[0] = total
        _copy_range(parts, 0, min(total, room), slots[self.rank, 8:])
        self._wait()
        self.phase ^= 1
        sizes = slots[:, :8].copy().view(np.int64).reshape(-1)
        if sizes.max() <= room:
            return [slots[r, 8 : 8 + n] for r, n in enumerate(sizes)]
        out = [np.empty(n, np.uint8) for n in sizes]
        for r, n in enumerate(sizes):
            out[r][: min(n, room)] = slots[r, 8 : 8 + min(n, room)]
        for start in range(room, int(sizes.max()), self.cap):
            slots = self.slots[self.phase]
            _copy_range(parts, start, min(total, start + self.cap), slots[self.rank])
            self._wait()
            self.phase ^= 1
            for r, n in enumerate(sizes):
                if n > start:
                    stop = min(n, start + self.cap)
                    out[r][start:stop] = slots[r, : stop - start]
        return out

    def allreduce_sum(self, buf):
        if not buf.flags.c_contiguous:
            raise ValueError(
                "LocalExchange.allreduce_sum: the buffer must be contiguous (shape %r)" % (buf.shape,)
            )
        if self.size == 1:
            return
        flat = buf.reshape(-1)
        raw = flat.view(np.uint8)
        step = self.cap // buf.itemsize
        for start in range(0, flat.size, step):
            stop = min(flat.size, start + step)
            slots = self._round(raw[start * buf.itemsize : stop * buf.itemsize])
            parts = [slots[r, : (stop - start) * buf.itemsize].view(buf.dtype) for r in range(self.size)]
            np.add(parts[0], parts[1], out=flat[start:stop])
            for part in parts[2:]:
                flat[start:stop] += part

    def allgather_rows(self, idx, rows):
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        rows = np.ascontiguousarray(rows)
        width, dtype = rows.shape[1], rows.dtype
        got = self._gather_bytes([idx.view(np.uint8), rows.reshape(-1).view(np.uint8)])
        per_row = 8 + width * dtype.itemsize
        idxs, blocks = [], []
        for raw in got:
            k = len(raw) // per_row
            idxs.append(raw[: 8 * k].view(np.int64))
            blocks.append(raw[8 * k :].view(dtype).reshape(k, width))
        return np.concatenate(idxs), np.concatenate(blocks)

    def broadcast(self, buf, root=0):
        raw = buf.reshape(-1).view(np.uint8)
        for start in range(0, raw.size, self.cap):
            stop = min(raw.size, start + self.cap)
            slots = self._round(raw[start:stop] if self.rank == root else raw[:0])
            if self.rank != root:
                raw[start:stop] = slots[root, : stop - start]

    def barrier(self):
        self._wait()

    def close(self):
        pass
