"""The Exchange of ranks started by ``mpirun``/``srun``: synchronous training across machines.

Every collective is one of mpi4py's buffer methods (upper-case ``Allreduce``,
``Allgatherv``, ``Bcast``), which hand the array's memory to MPI as it is: no
pickling and no Python-side copy of the gradient pool. A buffer that exposes
``__cuda_array_interface__`` (a cupy array) goes to MPI the same way, so a
CUDA-aware MPI reduces device buffers with this same class.

mpi4py is imported when an MpiExchange is made, not when dyn.parallel is, so
dyn works without it. Install it with ``pip install "dyn[mpi]"`` (mpi4py and
the MPICH of PyPI, which brings ``mpiexec``), or build mpi4py against the MPI
your cluster provides (``pip install --no-binary mpi4py mpi4py``).

Example (``mpirun -n 2 python train.py``)::

    ex = dyn.parallel.MpiExchange()
    dyn.parallel.train(loss_fn, data, trainer, batch_size=16, exchange=ex)
"""

from __future__ import annotations

import os
import shutil
import sys

import numpy as np

from dyn.parallel._exchange import Exchange

__all__ = ["MpiExchange", "import_mpi", "find_mpiexec"]


def _cores():
    """The set of cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return frozenset(os.sched_getaffinity(0))
    return frozenset(range(os.cpu_count() or 1))


def find_mpiexec():
    """The path of mpiexec (or mpirun) next to this Python (the MPICH of ``pip install 'dyn[mpi]'``),
    else on PATH; None when there is none. For what launches ranks (the MPI tests, the MPI bench)."""
    here = os.path.dirname(sys.executable)
    for name in ("mpiexec", "mpirun"):
        if os.access(os.path.join(here, name), os.X_OK):
            return os.path.join(here, name)
    return shutil.which("mpiexec") or shutil.which("mpirun")


def import_mpi():
    """mpi4py's MPI module, or an ImportError that says what to install."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError(
            "dyn.parallel.MpiExchange needs mpi4py and an MPI library, which are not installed: "
            "run  pip install 'dyn[mpi]'  (mpi4py + MPICH from PyPI), or install your cluster's MPI and "
            "pip install mpi4py; then launch the script with  mpirun -n 2 python train.py  (%s)" % e
        ) from e
    return MPI


def _contiguous(op, buf, writeable):
    """Check that MPI can use ``buf``'s memory as it is (a view of a pool must not be copied)."""
    flags = getattr(buf, "flags", None)
    if flags is None or not flags.c_contiguous:
        raise ValueError(
            "MpiExchange.%s: the buffer must be a C-contiguous array, got %s of shape %s"
            % (op, type(buf).__name__, getattr(buf, "shape", None))
        )
    if writeable and not flags.writeable:
        raise ValueError("MpiExchange.%s: the buffer (shape %s) is read-only" % (op, buf.shape))


class MpiExchange(Exchange):
    """The ranks of an MPI communicator as an Exchange.

    Args:
        comm: an mpi4py communicator (default ``MPI.COMM_WORLD``). It is
            duplicated, so dyn's collectives never match messages of other
            code on the same communicator; ``close()`` frees the duplicate.

    Every rank must make its MpiExchange (a collective) and call its methods
    in the same order with buffers of the same dtype and size.
    """

    def __init__(self, comm=None):
        MPI = import_mpi()
        self._MPI = MPI
        self.comm = (MPI.COMM_WORLD if comm is None else comm).Dup()
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        # the ranks on this machine whose cores overlap this rank's (a launcher that binds ranks to
        # their own cores, as Slurm does, leaves each its cores; unbound ranks share them all)
        node = self.comm.Split_type(MPI.COMM_TYPE_SHARED)
        mine = _cores()
        self.local_size = sum(1 for cores in node.allgather(mine) if cores & mine)
        node.Free()

    def __repr__(self):
        return "MpiExchange(rank=%d, size=%d)" % (self.rank, self.size)

    def _comm(self, op):
        if self.comm is None:
            raise RuntimeError("MpiExchange.%s: the exchange was closed" % op)
        return self.comm

    def allreduce_sum(self, buf):
        comm = self._comm("allreduce_sum")
        _contiguous("allreduce_sum", buf, writeable=True)
        if self.size > 1:
            comm.Allreduce(self._MPI.IN_PLACE, buf, op=self._MPI.SUM)

    def allgather_rows(self, idx, rows):
        """Every rank's (indices, rows) in rank order: the row counts are
        gathered first (one int64 each), then indices and rows with Allgatherv."""
        comm = self._comm("allgather_rows")
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        rows = np.ascontiguousarray(rows)
        if idx.ndim != 1 or rows.ndim != 2 or rows.shape[0] != idx.shape[0]:
            raise ValueError(
                "MpiExchange.allgather_rows: expected indices [k] and rows [k, d], got shapes "
                "%s and %s" % (idx.shape, rows.shape)
            )
        if self.size == 1:
            return idx, rows
        width = rows.shape[1]
        counts = np.zeros(self.size, dtype=np.int64)
        comm.Allgather(np.array([idx.shape[0]], dtype=np.int64), counts)
        total = int(counts.sum())
        all_idx = np.empty(total, dtype=np.int64)
        all_rows = np.empty((total, width), dtype=rows.dtype)
        comm.Allgatherv(idx, [all_idx, counts])
        comm.Allgatherv(rows, [all_rows, counts * width])
        return all_idx, all_rows

    def broadcast(self, buf, root=0):
        comm = self._comm("broadcast")
        _contiguous("broadcast", buf, writeable=True)
        if not 0 <= int(root) < self.size:
            raise ValueError(
                "MpiExchange.broadcast: root must be a rank in [0, %d), got %r" % (self.size, root)
            )
        if self.size > 1:
            comm.Bcast(buf, root=int(root))

    def barrier(self):
        self._comm("barrier").Barrier()

    def close(self):
        if self.comm is not None:
            self.comm.Free()
            self.comm = None
