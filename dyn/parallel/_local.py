"""Worker processes on one machine: fork them, watch them, stop them.

This process is worker 0 (it keeps the progress bar, the dev callback and the
model); workers 1..N-1 are forked from it, so they start with its model and
trainer. A watcher thread waits on the children: a child that raises sends its
traceback through a pipe and exits, a child killed by a signal just ends;
either way every other process is told to stop (a shared flag, and the barrier
they may wait at is broken) and train raises a WorkerError naming the worker.
Ctrl-C in this process sets the stop flag: every worker finishes its step and
exits (children ignore SIGINT, which a terminal sends to the whole group).
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
import traceback
from multiprocessing.connection import wait as wait_any

import numpy as np

import dyn as dy
from dyn.parallel._shm import LocalExchange, SpinBarrier, share_pools, shared_array
from dyn.parallel._sync import (
    Reporter,
    StopFlag,
    blas_share,
    batch_loss,
    epoch_order,
    example_costs,
    make_result,
    pool_runs,
    run_sync,
)

JOIN_S = 60.0  # how long a finished run waits for a worker before terminating it


class Group:
    """Workers 1..n-1 forked from this process, a barrier, a stop flag and a watcher."""

    def __init__(self, n):
        self.n = n
        self.ctx = mp.get_context("fork")
        self.barrier = SpinBarrier(n)
        self.stop = shared_array(1, np.int64)
        self.procs, self.conns, self.failures = [], [], {}
        self.alive, self.lock = set(), threading.Lock()  # ranks not yet reaped (by the watcher only)
        self.watcher = None

    def start(self, body):
        """Fork workers 1..n-1, each running body(rank); then start watching them."""
        for rank in range(1, self.n):
            recv, send = self.ctx.Pipe(duplex=False)
            proc = self.ctx.Process(
                target=_child,
                args=(rank, body, send, self),
                daemon=True,
                name="dyn.parallel worker %d" % rank,
            )
            proc.start()
            send.close()
            self.procs.append(proc)
            self.conns.append(recv)
            self.alive.add(rank)
        self.watcher = threading.Thread(target=self._watch, daemon=True, name="dyn.parallel watcher")
        self.watcher.start()

    def _watch(self):
        live = {p.sentinel: (rank, p) for rank, p in enumerate(self.procs, start=1)}
        while live:
            for sentinel in wait_any(list(live)):
                rank, proc = live.pop(sentinel)
                with self.lock:
                    proc.join()
                    self.alive.discard(rank)
                if proc.exitcode != 0:
                    try:
                        self.failures[rank] = self._why(rank, proc)
                    finally:
                        self.halt()  # whatever _why met, the others must not wait for this worker

    def _why(self, rank, proc):
        conn = self.conns[rank - 1]
        try:
            if conn.poll():
                return conn.recv()  # the traceback a raising worker sent
        except (EOFError, OSError):
            pass  # a killed worker: its end of the pipe closed with nothing sent
        code = proc.exitcode
        if code is not None and code < 0:
            return "worker %d (pid %d) was killed by signal %s (exit code %d)" % (
                rank,
                proc.pid,
                signal.Signals(-code).name,
                code,
            )
        return "worker %d (pid %d) exited with code %s" % (rank, proc.pid, code)

    def halt(self):
        """Tell every process to stop: the flag for those computing, a broken barrier for those waiting."""
        self.stop[0] = 1
        self.barrier.abort()

    def finish(self, timeout=JOIN_S):
        """Join every worker (terminating those that outlive the timeout) and the watcher."""
        if self.watcher is None:
            return
        for sig, wait_s in ((None, timeout), (signal.SIGTERM, 5.0), (signal.SIGKILL, None)):
            if sig is not None:
                self.halt()
                with self.lock:  # only processes the watcher has not reaped: their pids are still theirs
                    for rank in self.alive:
                        os.kill(self.procs[rank - 1].pid, sig)
            self.watcher.join(wait_s)
            if not self.watcher.is_alive():
                break
        for conn in self.conns:
            conn.close()

    def error(self):
        """A WorkerError for the failed workers, or None."""
        from dyn.parallel import WorkerError

        if not self.failures:
            return None
        return WorkerError(
            "dyn.parallel.train: " + "\n".join(self.failures[r] for r in sorted(self.failures))
        )


def _child(rank, body, conn, group):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # worker 0 decides when to stop
    group.barrier.rank = rank
    _die_with_parent()
    try:
        body(rank)
    except (threading.BrokenBarrierError, KeyboardInterrupt):
        pass  # another process stopped the run: not this worker's error
    except BaseException:  # noqa: BLE001 - every error goes to worker 0
        conn.send("worker %d (pid %d) raised:\n%s" % (rank, os.getpid(), traceback.format_exc()))
        group.halt()
        sys.exit(1)


def _die_with_parent():
    """SIGTERM this worker if worker 0 dies (so no worker is orphaned)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def train_local(loss_fn, data, trainer, n, mode, cfg):
    """dyn.parallel.train with n > 1 worker processes on this machine."""
    data = data if isinstance(data, list) else list(data)
    if mode == "sync":
        cfg.costs = example_costs(data, cfg.cost)  # a bad cost is raised here, before any fork
    group = Group(n)
    stop = StopFlag(on_set=group.halt if mode == "async" else None)
    try:
        if mode == "sync":  # each worker's run_sync runs BLAS with its share of the cores
            return _sync(loss_fn, data, trainer, n, cfg, group, stop)
        with blas_share(n):  # set before the fork: the workers inherit it
            return _async(loss_fn, data, trainer, n, cfg, group, stop)
    finally:
        stop.close()


def _run_group(group, body, parent):
    """Start the workers on body, run parent() here, join everyone; raise the workers' error first."""
    group.start(body)
    try:
        out = parent()
    except BaseException as e:
        group.halt()
        group.finish()
        err = group.error()
        if err is not None and isinstance(e, threading.BrokenBarrierError):
            raise err from None  # worker 0 was only waiting for the worker that failed
        raise
    group.finish()
    err = group.error()
    if err is not None:
        raise err
    return out


def _sync(loss_fn, data, trainer, n, cfg, group, stop):
    runs = pool_runs(trainer.model, dense_only=True)
    dense_bytes = sum((b - a) * pool.itemsize for pool, a, b in runs)
    ex = LocalExchange(n, min(max(dense_bytes, 1 << 20), 64 << 20), group.barrier)

    def body(rank):
        run_sync(loss_fn, data, trainer, ex.for_rank(rank), cfg, stop=StopFlag(install=False))

    result = _run_group(group, body, lambda: run_sync(loss_fn, data, trainer, ex.for_rank(0), cfg, stop=stop))
    result["workers"] = n
    return result


def _async(loss_fn, data, trainer, n, cfg, group, stop):
    check, undo = share_pools(trainer.model, trainer)
    stats = shared_array(4 * n, np.float64).reshape(n, 4)  # per worker: loss, units, examples, steps
    state = {"interrupted": False, "report": None, "t0": time.perf_counter()}

    def body(rank):
        _async_worker(rank, n, loss_fn, data, trainer, cfg, group, stats, check)

    def parent():
        report = state["report"] = Reporter(cfg, trainer.model, cfg.epochs * len(data), True)
        state["t0"] = report.t0
        done = _async_worker(0, n, loss_fn, data, trainer, cfg, group, stats, check, report)
        state["interrupted"] = not done and stop.set
        return done

    try:
        _run_group(group, body, parent)
    finally:
        if state["report"] is not None:  # after every worker is gone: nothing writes the model any more
            state["report"].close(state["interrupted"] or group.failures != {})
        undo()
    if state["interrupted"]:
        raise KeyboardInterrupt("dyn.parallel.train: interrupted")
    dev = state["report"].dev_history
    return make_result(stats.sum(0), time.perf_counter() - state["t0"], dev, n, "async")


def _async_worker(rank, n, loss_fn, data, trainer, cfg, group, stats, check, report=None):
    """Hogwild: this worker's share of every epoch, updating the shared parameters.
    Returns False when it stopped early (the stop flag)."""
    if rank > 0:
        dy.reset_random_seed(cfg.seed * 7919 + rank + 1)
    for epoch in range(cfg.epochs):
        shard = epoch_order(len(data), cfg.seed, epoch)[rank::n]
        for start in range(0, len(shard), cfg.batch_size):
            if group.stop[0]:
                return False
            part = shard[start : start + cfg.batch_size]
            value, units = batch_loss(loss_fn, [data[i] for i in part])
            check()
            trainer.update()
            stats[rank] += (value, units, len(part), 1)
            if report is not None:
                total = stats.sum(0)
                report.show(int(total[2]), total[0], total[1])
                if cfg.dev and cfg.dev_every and int(stats[0, 3]) % cfg.dev_every == 0:
                    report.run_dev(epoch, int(total[3]))
        try:
            group.barrier.wait()  # the epoch is done everywhere
            if report is not None:
                report.epoch_end(epoch, int(stats[:, 3].sum()))
            group.barrier.wait()
        except threading.BrokenBarrierError:
            return False  # stopped (Ctrl-C or a failed worker): train tells which
    return True
