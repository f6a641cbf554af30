"""The shared-memory transport of worker processes: every collective on known inputs, in
slots small enough that payloads take several rounds, and the spinning barrier."""

import threading
import time

import numpy as np
import pytest

from dyn.parallel import WorkerError
from dyn.parallel._local import Group, _run_group
from dyn.parallel._shm import LocalExchange, SpinBarrier
from tests.parallel._helpers import child_pids


def _rows(rank, k, width=5):
    rng = np.random.RandomState(100 + rank)
    return rng.randint(0, 50, size=k).astype(np.int64), rng.randn(k, width).astype(np.float32)


def _check_collectives(ex, rank, size, counts):
    for trial in range(3):  # the slot sets alternate: several calls in a row must not mix them up
        dense = np.arange(3000, dtype=np.float32) * (rank + 1) + trial
        ex.allreduce_sum(dense)  # 12000 bytes: 3 rounds of 4096-byte slots
        want = np.arange(3000, dtype=np.float32) * sum(range(1, size + 1)) + trial * size
        np.testing.assert_array_equal(dense, want)
        small = np.array([rank, 1.0, trial])
        ex.allreduce_sum(small)
        np.testing.assert_array_equal(small, [sum(range(size)), size, trial * size])
        idx, rows = ex.allgather_rows(*_rows(rank, counts[rank]))
        want_idx = np.concatenate([_rows(r, counts[r])[0] for r in range(size)])
        want_rows = np.concatenate([_rows(r, counts[r])[1] for r in range(size)])
        np.testing.assert_array_equal(idx, want_idx)
        np.testing.assert_array_equal(rows, want_rows)
        buf = np.full(2500, float(rank), np.float64)  # 20000 bytes from rank 1
        ex.broadcast(buf, root=1)
        np.testing.assert_array_equal(buf, np.ones(2500))
        ex.barrier()


@pytest.mark.parametrize(
    "size,counts",
    [(2, [3, 400]), (3, [0, 7, 250]), (4, [1, 0, 2, 3])],
    ids=["2-multiround-rows", "3-one-empty", "4-small"],
)
def test_collectives_give_every_rank_the_same_exact_result(size, counts):
    group = Group(size)
    ex = LocalExchange(size, 4096, group.barrier)  # 400 rows of 5 floats + ids = 11200 bytes > a slot

    def body(rank):
        _check_collectives(ex.for_rank(rank), rank, size, counts)

    _run_group(group, body, lambda: body(0))
    assert child_pids() == []


def test_a_failed_check_in_a_worker_is_reported():
    group = Group(2)
    ex = LocalExchange(2, 4096, group.barrier)

    def body(rank):
        e = ex.for_rank(rank)
        got = np.array([float(rank)])
        e.allreduce_sum(got)
        assert got[0] == 5.0, "sum was %s" % got[0]  # it is 1.0: this fails in the worker (and here)

    with pytest.raises((WorkerError, AssertionError), match="sum was 1.0"):
        _run_group(group, body, lambda: body(0))
    assert child_pids() == []


def test_spin_barrier_orders_writes_and_abort_breaks_every_waiter():
    from dyn.parallel._shm import shared_array

    group = Group(3)
    seen = shared_array(3, np.int64)

    def body(rank):
        for step in range(1, 301):
            seen[rank] = step
            group.barrier.wait()
            assert (seen >= step).all(), (rank, step, seen.copy())  # everyone's write is visible
            group.barrier.wait()

    _run_group(group, body, lambda: body(0))

    barrier = SpinBarrier(2)
    broken = []

    def waiter():
        try:
            barrier.wait()  # rank 0 waits for a rank 1 that never comes
        except threading.BrokenBarrierError:
            broken.append(True)

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.05)
    barrier.abort()
    t.join(5)
    assert broken == [True] and not t.is_alive()
    with pytest.raises(threading.BrokenBarrierError):
        barrier.wait()  # broken stays broken
