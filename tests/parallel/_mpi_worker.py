"""What each rank runs under ``mpiexec -n K`` for tests/parallel/test_mpi*.py.

    python _mpi_worker.py exchange OUT          the collectives on known inputs
    python _mpi_worker.py cores OUT             each rank's cores and local_size
    python _mpi_worker.py train OUT CASES B N   train every case of CASES for N steps
                                                at B examples per rank

Ranks write what they got to OUT (``<name>.rank<r>.npz``, each written to a
temporary name then renamed); the test checks it against what it computes
itself, so nothing here decides whether a test passes.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import dyn as dy  # noqa: E402
import dyn.parallel as par  # noqa: E402
from tests.parallel._helpers import TRAINERS, Model, make_data  # noqa: E402


def case_config(case):
    """'adam-sparse' -> (factory, sparse updates, table read whole as a matrix)."""
    name, mode = case.split("-")
    return TRAINERS[name], mode == "sparse", mode == "whole"


def case_data(size, batch, steps):
    """The examples of a run of ``steps`` global batches of size*batch (one epoch)."""
    return make_data(size * batch * steps, seed=11)


def write(out, name, rank, arrays):
    path = os.path.join(out, "%s.rank%d.npz" % (name, rank))
    tmp = path + ".tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def run_exchange(ex, out):
    r, k = ex.rank, ex.size
    got = {}
    for dtype in ("float32", "float64"):
        buf = (np.arange(7) + 10.0 * r).astype(dtype)
        address = buf.ctypes.data
        ex.allreduce_sum(buf)
        assert buf.ctypes.data == address  # in place: the same memory
        got["sum_" + dtype] = buf
    idx = np.arange(r, dtype=np.int64) + 100 * r  # rank r sends r rows: rank 0 sends none
    rows = np.arange(r * 3, dtype=np.float32).reshape(r, 3) + 1000 * r
    got["gather_idx"], got["gather_rows"] = ex.allgather_rows(idx, rows)
    for root in range(k):
        buf = np.full(5, float(r), dtype=np.float32)
        ex.broadcast(buf, root)
        got["bcast_%d" % root] = buf
    got["local_size"] = np.array(ex.local_size)
    # the loop runs BLAS with this rank's share of the machine's cores (more than that set here)
    from threadpoolctl import threadpool_info, threadpool_limits

    from dyn.parallel._sync import usable_cores

    model, seen = Model(), []

    def loss(batch):
        seen.append(min(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"))
        return model.loss(batch)

    with threadpool_limits(limits=4, user_api="blas"):
        par.train(
            loss, make_data(4 * k), dy.SimpleSGDTrainer(model.m), batch_size=2, progress=False, exchange=ex
        )
    got["blas_in_train"], got["cores"] = np.array(seen), np.array(usable_cores())
    ex.barrier()
    write(out, "exchange", r, got)


def run_train(ex, out, cases, batch, steps):
    """Each case: ranks start from different values (broadcast makes them rank 0's),
    train ``steps`` synchronous steps, rank 0 saves; every rank writes its final values."""
    for case in cases.split(","):
        make_trainer, sparse, whole = case_config(case)
        model = Model(seed=1 + ex.rank)
        trainer = make_trainer(model.m)
        trainer.set_sparse_updates(sparse or whole)
        save = os.path.join(out, "%s.ckpt.rank%d" % (case, ex.rank))  # named by rank: the test sees who saved
        result = par.train(
            model.whole_table_loss if whole else model.loss,
            case_data(ex.size, batch, steps),
            trainer,
            batch_size=batch,
            epochs=1,
            save=save,
            progress=False,
            exchange=ex,
        )
        arrays = model.params()
        arrays["steps"], arrays["examples"], arrays["loss"] = result.steps, result.examples, result.loss
        arrays["device"] = np.array(model.W1.pool.device)    # where the rank's parameters lived
        write(out, case, ex.rank, arrays)


def main(argv):
    ex = par.MpiExchange()
    try:
        if argv[0] == "exchange":
            run_exchange(ex, argv[1])
        elif argv[0] == "cores":  # what this rank runs on, and how many ranks share that
            write(
                argv[1],
                "cores",
                ex.rank,
                {"cores": np.array(sorted(os.sched_getaffinity(0))), "local_size": np.array(ex.local_size)},
            )
        else:
            run_train(ex, argv[1], argv[2], int(argv[3]), int(argv[4]))
    finally:
        ex.close()


if __name__ == "__main__":
    main(sys.argv[1:])
