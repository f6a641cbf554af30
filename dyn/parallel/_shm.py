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

import numpy as np

from dyn.parallel._exchange import Exchange


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
            raise RuntimeError("dyn.parallel.train (async): parameters were created during training, so "
                               "the parameter pool grew out of shared memory; create every parameter before "
                               "calling train")

    def undo():
        for pool in pools:
            if pool.values is not None:
                pool.adopt(np.zeros_like(pool.values), np.zeros_like(pool.grads))
        for s in states:
            s.adopt_arrays([np.zeros_like(a) for a in s.arrays])

    return check, undo


class LocalExchange(Exchange):
    """Exchange between ``size`` processes forked from one parent.

    Make it in the parent with ``LocalExchange.create(size, slot_bytes, barrier)``
    before forking; each process then calls ``for_rank(rank)``.
    """

    def __init__(self, size, slot_bytes, barrier):
        self.size, self.rank = int(size), 0
        self.cap = max(int(slot_bytes) // 8 * 8, 4096)
        self.barrier_ = barrier
        self.slots = shared_array(2 * self.size * self.cap, np.uint8).reshape(2, self.size, self.cap)
        self.lens = shared_array(2 * self.size, np.int64).reshape(2, self.size)
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

    def _gather_bytes(self, payload):
        """Every rank's bytes (a uint8 array each), in rank order."""
        lens = self.lens[self.phase]
        lens[self.rank] = len(payload)
        self._wait()
        self.phase ^= 1
        sizes = lens.copy()
        out = [np.empty(n, np.uint8) for n in sizes]
        for start in range(0, int(sizes.max()), self.cap):
            slots = self._round(payload[start : start + self.cap])
            for r, n in enumerate(sizes):
                if n > start:
                    stop = min(n, start + self.cap)
                    out[r][start:stop] = slots[r, : stop - start]
        return out

    def allreduce_sum(self, buf):
        if not buf.flags.c_contiguous:
            raise ValueError("LocalExchange.allreduce_sum: the buffer must be contiguous (shape %r)"
                             % (buf.shape,))
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
        payload = np.concatenate([idx.view(np.uint8), rows.reshape(-1).view(np.uint8)])
        got = self._gather_bytes(payload)
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
