"""Worker processes on one machine: fork them, watch them, stop them.

This process is worker 0 (it keeps the progress bar, the dev callback and the
model); workers 1..N-1 are forked from it, so they start with its model and
trainer. A watcher thread waits on the children: a child that raises sends its
traceback through a pipe and exits, a child killed by a signal just ends;
either way every other process is told to stop (a shared flag, and the barrier
they may wait at is broken) and train raises a WorkerError naming the worker.
Ctrl-C in this process sets the stop flag: every worker finishes its step and
exits (children ignore SIGINT, which a terminal sends to the whole group).

The watcher also finds a worker that makes no progress (stopped with SIGSTOP,
say, which would leave the others waiting for it at the barrier forever): every
worker's heartbeat (its barrier arrivals, its waits at the barrier and, in
async mode, its steps, all in shared memory) and the CPU time it uses
(/proc/<pid>/stat) are read a few times per stall timeout; a worker for which
neither changes for that long is reported (WorkerStalledError, with its state
from /proc) and terminated, and the run stops as for a failed worker.

A worker that has to be ended gets SIGTERM, then SIGCONT (a stopped process
acts on SIGTERM only once continued), then SIGKILL after a grace period; and
its parent-death signal is SIGKILL, which even a stopped process cannot
outlive, so no worker outlives worker 0, however worker 0 ends.
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
from dyn.parallel._errors import WorkerError, WorkerStalledError
from dyn.parallel._shm import LocalExchange, SpinBarrier, share_pools, shared_array
from dyn.parallel._sync import (
    Reporter,
    StopFlag,
    batch_loss,
    blas_share,
    epoch_order,
    example_costs,
    make_result,
    pool_runs,
    run_sync,
)

JOIN_S = 60.0  # how long a finished run waits for a worker before terminating it
GRACE_S = 2.0  # how long a worker sent SIGTERM (and SIGCONT) has before SIGKILL
INTERRUPT_JOIN_S = (
    5.0  # how long a run stopped by Ctrl-C in worker 0 waits for a worker before terminating it
)

# the state letters of /proc/<pid>/stat (proc(5))
STATES = {
    "R": "running",
    "S": "sleeping",
    "D": "in uninterruptible sleep",
    "T": "stopped",
    "t": "stopped by a debugger",
    "Z": "a zombie",
    "X": "dead",
    "I": "idle",
    "P": "parked",
    "W": "paging",
    "K": "wakekill",
}


def proc_stat(pid):
    """(state letter, CPU clock ticks used) of process ``pid`` from /proc/<pid>/stat,
    or (None, None) where it cannot be read (the process is gone, or there is no /proc)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()  # the command name, in (), may hold anything
        return fields[0], int(fields[11]) + int(fields[12])  # state, utime + stime
    except (OSError, IndexError, ValueError):
        return None, None


def describe_state(code):
    """'stopped (T)', 'sleeping (S)', ... for a state letter of /proc/<pid>/stat."""
    if code is None:
        return "unknown (no /proc entry)"
    return "%s (%s)" % (STATES.get(code, "state"), code)


def _signal(pid, *sigs):
    for sig in sigs:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


class Group:
    """Workers 1..n-1 forked from this process, a barrier, a stop flag and a watcher."""

    def __init__(self, n, stall_timeout=None):
        self.n = n
        self.ctx = mp.get_context("fork")
        self.barrier = SpinBarrier(n)
        self.stop = shared_array(1, np.int64)
        self.procs, self.conns, self.failures = [], [], {}
        self.alive, self.lock = set(), threading.Lock()  # ranks not yet reaped (by the watcher only)
        self.watcher = None
        self.done = threading.Event()  # set when the watcher has reaped every worker (or died)
        self.parent = os.getpid()
        self.stall_timeout = stall_timeout
        self.stalled = {}  # rank -> (pid, state, seconds) of a worker found making no progress
        self.kill_at = {}  # rank -> when a terminated worker gets SIGKILL (time.monotonic)

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
        try:
            self._watch_until_reaped()
        finally:
            self.done.set()

    def _watch_until_reaped(self):
        live = {p.sentinel: (rank, p) for rank, p in enumerate(self.procs, start=1)}
        timeout = self.stall_timeout
        poll = None if timeout is None else min(max(timeout / 4.0, 0.05), 1.0)
        seen = {rank: [None, 0.0] for rank in range(1, self.n)}  # last progress read, seconds unchanged
        last = time.monotonic()
        while live:
            for sentinel in wait_any(list(live), poll):
                rank, proc = live.pop(sentinel)
                with self.lock:
                    proc.join()
                    self.alive.discard(rank)
                    self.kill_at.pop(rank, None)
                if proc.exitcode != 0:
                    try:
                        if rank not in self.failures:  # a stalled worker's report stands
                            self.failures[rank] = self._why(rank, proc)
                    finally:
                        self.halt()  # whatever _why met, the others must not wait for this worker
            if poll is None:
                continue
            now = time.monotonic()
            # at most two polls' worth a round: when this process itself was stopped (Ctrl-Z), the
            # workers were too, and that time is nobody's stall
            gap, last = min(now - last, 2 * poll), now
            for rank, proc in list(live.values()):
                if rank in self.kill_at:
                    if now >= self.kill_at[rank]:
                        _signal(proc.pid, signal.SIGKILL)  # not reaped yet (this thread reaps): still its pid
                        self.kill_at[rank] = float("inf")
                else:
                    self._check_progress(rank, proc, seen[rank], gap)

    def _check_progress(self, rank, proc, seen, gap):
        """Count the time for which worker ``rank`` has shown no heartbeat and used no CPU;
        past the stall timeout, report it and terminate it."""
        code, ticks = proc_stat(proc.pid)
        if code in ("Z", "X"):
            return  # it is exiting: its sentinel will tell
        now = (self.barrier.progress(rank), ticks)
        if now != seen[0]:
            seen[0], seen[1] = now, 0.0
            return
        seen[1] += gap
        if seen[1] < self.stall_timeout or rank in self.failures:
            return
        state = describe_state(code)
        self.stalled[rank] = (proc.pid, state, seen[1])
        self.failures[rank] = (
            "worker %d (pid %d) made no progress for %.1f s (no step, no wait at a barrier, no CPU "
            "time; stall_timeout=%g): it was %s, so the run was stopped and the worker terminated"
            % (rank, proc.pid, seen[1], self.stall_timeout, state)
        )
        self.halt()
        _signal(proc.pid, signal.SIGTERM, signal.SIGCONT)  # a stopped process acts on SIGTERM once continued
        self.kill_at[rank] = time.monotonic() + GRACE_S

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

    def finish(self, timeout=None):
        """Wait for every worker to exit and be reaped. Workers still there after ``timeout``
        (JOIN_S) seconds, or when the wait is interrupted (Ctrl-C), get SIGTERM and SIGCONT, then
        SIGKILL after GRACE_S (at once on another Ctrl-C), and are reaped."""
        if self.watcher is None:
            return
        try:
            # an Event, not watcher.join: a join cut short by Ctrl-C marks the thread as ended (Python < 3.13)
            self.done.wait(JOIN_S if timeout is None else timeout)
        finally:
            try:
                if not self.done.is_set():
                    self._terminate_rest(JOIN_S if timeout is None else timeout)
                with self.lock:
                    rest = [self.procs[rank - 1] for rank in self.alive]
                for proc in rest:  # only if the watcher itself died: reap what it left
                    _signal(proc.pid, signal.SIGKILL)
                    proc.join()
            finally:
                for conn in self.conns:
                    conn.close()

    def _signal_rest(self, *sigs, timeout=None):
        """Send sigs to every worker not yet reaped (noting it as a failure when timeout is given)."""
        with self.lock:  # only processes the watcher has not reaped: their pids are still theirs
            for rank in self.alive:
                pid = self.procs[rank - 1].pid
                if timeout is not None and rank not in self.failures:
                    self.failures[rank] = (
                        "worker %d (pid %d) had not exited %g s after the run stopped (it was %s), "
                        "so it was terminated" % (rank, pid, timeout, describe_state(proc_stat(pid)[0]))
                    )
                _signal(pid, *sigs)

    def _terminate_rest(self, timeout):
        self.halt()
        self._signal_rest(signal.SIGTERM, signal.SIGCONT, timeout=timeout)
        interrupted = None
        try:
            self.done.wait(GRACE_S)
        except KeyboardInterrupt as e:  # another Ctrl-C: no grace
            interrupted = e
        if not self.done.is_set():
            self._signal_rest(signal.SIGKILL)
            while not self.done.is_set():
                try:
                    self.done.wait()
                except KeyboardInterrupt as e:  # nothing is left to do but reap them
                    interrupted = e
        if interrupted is not None:
            raise interrupted

    def error(self):
        """A WorkerError for the failed workers (WorkerStalledError when one stalled), or None."""
        if not self.failures:
            return None
        text = "dyn.parallel.train: " + "\n".join(self.failures[r] for r in sorted(self.failures))
        if self.stalled:
            rank = min(self.stalled)
            pid, state, seconds = self.stalled[rank]
            return WorkerStalledError(text, rank=rank, pid=pid, state=state, seconds=seconds)
        return WorkerError(text)


def _child(rank, body, conn, group):
    _die_with_parent(group.parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # worker 0 decides when to stop
    group.barrier.rank = rank
    try:
        body(rank)
    except (threading.BrokenBarrierError, KeyboardInterrupt):
        pass  # another process stopped the run: not this worker's error
    except BaseException:  # noqa: BLE001 - every error goes to worker 0
        conn.send("worker %d (pid %d) raised:\n%s" % (rank, os.getpid(), traceback.format_exc()))
        group.halt()
        sys.exit(1)


def _die_with_parent(parent):
    """SIGKILL this worker when worker 0 dies, so no worker is orphaned. SIGKILL, not SIGTERM: a
    stopped worker would act on SIGTERM only once continued, and nobody would continue it."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux
    if os.getppid() != parent:  # worker 0 died before the line above: nothing would signal this worker
        os._exit(1)


def train_local(loss_fn, data, trainer, n, mode, cfg):
    """dyn.parallel.train with n > 1 worker processes on this machine."""
    data = data if isinstance(data, list) else list(data)
    if mode == "sync":
        cfg.costs = example_costs(data, cfg.cost)  # a bad cost is raised here, before any fork
    group = Group(n, cfg.stall_timeout)
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
        # after Ctrl-C every worker is between steps and exits at once (sync), or must not be waited for
        group.finish(INTERRUPT_JOIN_S if isinstance(e, KeyboardInterrupt) else None)
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
    state = {"interrupted": False, "failed": False, "report": None, "t0": time.perf_counter()}

    def body(rank):
        _async_worker(rank, n, loss_fn, data, trainer, cfg, group, stats, check)

    def parent():
        report = state["report"] = Reporter(cfg, trainer.model, cfg.epochs * len(data), True)
        state["t0"] = report.t0
        try:
            done = _async_worker(0, n, loss_fn, data, trainer, cfg, group, stats, check, report)
        except BaseException:
            state["failed"] = True  # this worker's own error: the model is saved all the same
            raise
        state["interrupted"] = not done and stop.set
        return done

    try:
        _run_group(group, body, parent)
    finally:
        if state["report"] is not None:  # after every worker is gone: nothing writes the model any more
            state["report"].close(state["interrupted"] or state["failed"] or group.failures != {})
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
            group.barrier.beat()  # a step done: progress for the stall watcher
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
