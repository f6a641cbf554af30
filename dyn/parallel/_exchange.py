"""The one small interface every synchronous data-parallel transport implements.

Synchronous training needs four collective operations and nothing else: sum a
buffer over all workers in place (the dense gradient pool, a loss or a
count), gather the lookup rows every worker touched, broadcast the parameters
from rank 0, and a barrier. Worker processes on one machine implement them over
shared memory (dyn.parallel's local transport), separate machines over MPI
(dyn.parallel's MPI transport); a GPU transport (CUDA-aware MPI or NCCL)
implements the same methods on device buffers, so the training step above it
never changes.

Buffers are contiguous arrays of the pool's dtype (numpy on the CPU); every
method is collective: all ranks call it, in the same order, with buffers of the
same dtype and size (allgather_rows: the same row width, any row count).
"""

from __future__ import annotations

import numpy as np


class Exchange:
    """Abstract transport between ``size`` workers; this one is ``rank``."""

    rank: int = 0
    size: int = 1
    # how many of the ranks (this one included) run on this rank's cores: on this machine, with
    # overlapping CPU affinity. dyn.parallel's loops give each its share of those cores for BLAS.
    local_size: int = 1

    def allreduce_sum(self, buf: np.ndarray) -> None:
        """Replace ``buf`` on every rank by the elementwise sum over ranks (in place)."""
        raise NotImplementedError

    def allgather_rows(self, idx: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Gather (row indices int64 [k], rows [k, d]) from every rank.

        Returns every rank's indices and rows concatenated in rank order (the
        same result on all ranks); indices may repeat across ranks, merging
        them is the caller's business.
        """
        raise NotImplementedError

    def broadcast(self, buf: np.ndarray, root: int = 0) -> None:
        """Overwrite ``buf`` on every rank with root's ``buf`` (in place)."""
        raise NotImplementedError

    def barrier(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Release the transport's resources (idempotent)."""


class SingleProcess(Exchange):
    """The trivial transport of one worker: every collective is the identity."""

    def allreduce_sum(self, buf):
        pass

    def allgather_rows(self, idx, rows):
        return np.asarray(idx, dtype=np.int64), np.asarray(rows)

    def broadcast(self, buf, root=0):
        pass

    def barrier(self):
        pass
