"""Synchronous data parallelism over an Exchange: the gradient step and the loop.

Every rank holds a replica of the model and the trainer. After backward,
``sync_gradients`` sums the gradients over ranks (and averages them when
asked), so ``trainer.update()`` then runs the same step on every rank and the
replicas stay equal, step after step, to the bit: every rank reduces in the
same order. Dense parameters are summed in place on the pool's gradient
buffer, one collective per maximal contiguous run of them (parameters are
allocated one after another, so a model is usually 1-3 runs); a lookup table
exchanges only the rows it touched, as (index, row) pairs, merged by index,
and the touched set becomes the union, so the trainer's exact sparse update
(dyn/_core/train/catchup.pyx) runs identically everywhere.

``run_sync`` is the loop of one rank: every global batch of size x batch_size
examples (one permutation per epoch from the seed, the same on every rank) is
split by rank, each rank computes its part's loss and gradient, the gradients
are summed (``average=False``, the default: exact for a loss that sums over its
batch) and every rank steps. With a summed loss, N ranks on batches of B are one
process on batches of N*B, to float32 rounding (the summation order differs).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
import time

import numpy as np

import dyn as dy
from dyn.parallel._exchange import Exchange

__all__ = ["sync_gradients", "broadcast_parameters", "run_sync", "TrainResult", "Config"]


# ---------------------------------------------------------------- layout of a model in its pools


def model_params(model):
    """Every Parameters then every LookupParameters of the collection (subcollections too)."""
    return list(model.parameters_list()) + list(model.lookup_parameters_list())


def pool_runs(model, dense_only):
    """[(pool, start, stop)]: maximal contiguous runs of the model's parameters in
    each pool (only non-lookup ones when dense_only), in pool order. Runs span
    the 16-element alignment gaps, which stay zero in values and gradients."""
    mine = {id(p) for p in model_params(model)}
    pools = []
    for p in model_params(model):
        if not any(p.pool is q for q in pools):
            pools.append(p.pool)
    runs = []
    for pool in pools:
        start = stop = None
        for p in pool.members:  # creation order = offset order (a bump allocator)
            if id(p) in mine and not (dense_only and p.is_lookup):
                if start is None:
                    start = p.off
                stop = p.off + p.size
            elif start is not None:
                runs.append((pool, start, stop))
                start = None
        if start is not None:
            runs.append((pool, start, stop))
    return runs


# ---------------------------------------------------------------- the synchronous step


def usable_cores():
    """The cores this process may run on (its affinity mask, where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def blas_threads(local_size):
    """BLAS threads for each of ``local_size`` processes sharing this machine: its cores shared out."""
    return max(1, usable_cores() // local_size)


@contextlib.contextmanager
def blas_share(local_size):
    """Run BLAS with this process's share of the cores while ``local_size`` > 1 processes train on
    this machine; the previous setting comes back afterwards. Processes that each run a multithreaded
    BLAS ask for local_size times the cores, and OpenBLAS's idle threads spin: 2 workers on 2 cores
    ran 6x slower than one process, 2 MPI ranks 40x."""
    if local_size <= 1:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=blas_threads(local_size), user_api="blas"):
        yield


def sync_gradients(model, exchange: Exchange, average: bool = True) -> None:
    """Sum (or average) the model's gradients over every rank, in place.

    Call it on every rank after backward and before ``trainer.update()``.
    Dense gradients are all-reduced on the pool's buffer (no copy per
    parameter); each lookup table gathers every rank's touched rows, sums
    duplicates by index in rank order, writes the sums back into the table's
    gradient and makes the union its touched set. A table used whole (as a
    matrix) on any rank is exchanged whole and marked so on every rank.

    Args:
        model: the ParameterCollection being trained (the same on every rank).
        exchange: the transport; ``exchange.size == 1`` returns at once.
        average: divide by the number of ranks (for a loss that is a mean over
            the batch); False sums (for a loss that sums over the batch).
    """
    n = exchange.size
    if n == 1:
        return
    for pool, a, b in pool_runs(model, dense_only=True):
        buf = pool.host_range(True, a, b)  # the pool itself on the CPU; a host copy of a device's
        exchange.allreduce_sum(buf)
        if average:
            buf *= buf.dtype.type(1.0 / n)
        if pool.device != "CPU":
            pool.put(True, a, buf)
    for p in model.lookup_parameters_list():
        if not p.updated:
            continue
        host = p.grad_view()  # (a copy on a device: written back below)
        grad = host.reshape(p.nrows, p.rowsize)
        whole = p.touched_all()
        idx = np.arange(p.nrows, dtype=np.int64) if whole else p.touched_rows().astype(np.int64)
        rows = grad[idx]
        if whole:  # one extra row with index -1 tells the others the table was used whole
            idx = np.append(idx, -1)
            rows = np.concatenate([rows, np.zeros((1, p.rowsize), grad.dtype)])
        all_idx, all_rows = exchange.allgather_rows(idx, rows)
        all_idx = np.asarray(all_idx, dtype=np.int64)
        flagged = all_idx < 0
        any_whole = bool(flagged.any())
        if any_whole:
            all_idx, all_rows = all_idx[~flagged], all_rows[~flagged]
        uniq, merged = merge_rows(all_idx, all_rows)
        if average:
            merged *= grad.dtype.type(1.0 / n)
        grad[uniq] = merged
        if p.pool.device != "CPU":
            p.write_grads(host)
        p.set_touched(uniq)
        if any_whole:
            p.mark_all_touched()


def merge_rows(idx, rows):
    """(unique indices, rows summed by index): each index's rows added in the order they
    come (rank order), so every rank gets the same bits. np.add.at does the same but
    ~20x slower (0.4 ms a step for a tagger's 170 rows of 128): here each pass adds
    the k-th row of every index with one fancy-indexed +=, and there are at most as
    many passes as ranks (a rank sends each index once)."""
    uniq, inverse, counts = np.unique(idx, return_inverse=True, return_counts=True)
    merged = np.zeros((len(uniq), rows.shape[1]), rows.dtype)
    order = np.argsort(inverse, kind="stable")
    nth = np.arange(len(order)) - (np.cumsum(counts) - counts)[inverse[order]]  # k of the k-th row
    for k in range(int(counts.max()) if len(counts) else 0):
        take = order[nth == k]
        merged[inverse[take]] += rows[take]  # one row per index in a pass, so += adds them all
    return uniq, merged


def broadcast_parameters(model, exchange: Exchange, root: int = 0, trainer=None) -> None:
    """Make every rank's parameter values (and trainer state) root's.

    Lookup tables are brought up to date first (the trainer's lazy catch-up),
    then each contiguous run of the model's parameters in the pool is
    broadcast. With ``trainer``, its per-parameter state arrays (momenta,
    moments) and its update/clip counts and learning rate are broadcast too.
    A lookup table's catch-up schedule is not: start every rank from the same
    trainer history (fresh trainers, or the same loaded state).
    """
    if exchange.size == 1:
        return
    for p in model.lookup_parameters_list():
        p.value_view()  # runs the trainer's catch-up of idle rows
    for pool, a, b in pool_runs(model, dense_only=False):
        buf = pool.host_range(False, a, b)
        exchange.broadcast(buf, root)
        if pool.device != "CPU":
            pool.put(False, a, buf)
    if trainer is None:
        return
    for p in trainer._params():
        s = trainer._state(p)
        s.flush()
        for i, arr in enumerate(s.arrays):
            if s.device == "CPU":
                exchange.broadcast(arr, root)
            else:  # through the host
                host = s.host_array(i)
                exchange.broadcast(host, root)
                s.set_array(i, host)
    scalars = np.array([trainer.updates, trainer.clips, trainer.learning_rate], dtype=np.float64)
    exchange.broadcast(scalars, root)
    trainer.updates, trainer.clips = int(scalars[0]), int(scalars[1])
    trainer.learning_rate = float(scalars[2])


# ---------------------------------------------------------------- the loop


class Config:
    """What dyn.parallel.train was asked for, checked (its docstring has the defaults and meanings)."""

    def __init__(
        self, batch_size, epochs, dev, dev_every, save, seed, progress, average, cost, stall_timeout
    ):
        if batch_size is None:
            batch_size = 1
        if int(batch_size) < 1 or int(epochs) < 1:
            raise ValueError(
                "dyn.parallel.train: batch_size and epochs must be >= 1, got %r and %r" % (batch_size, epochs)
            )
        if dev_every is not None and int(dev_every) < 1:
            raise ValueError("dyn.parallel.train: dev_every must be >= 1, got %r" % (dev_every,))
        self.batch_size, self.epochs = int(batch_size), int(epochs)
        self.dev, self.dev_every, self.save = dev, dev_every, save
        self.seed, self.progress, self.average = int(seed), bool(progress), bool(average)
        if cost is not None and not callable(cost):
            raise TypeError(
                "dyn.parallel.train: cost must be a function example -> number, got %s" % type(cost).__name__
            )
        self.cost, self.costs = cost, None  # costs: cost() of every example, once computed
        if stall_timeout is not None:
            if isinstance(stall_timeout, bool) or not isinstance(stall_timeout, (int, float)):
                raise TypeError(
                    "dyn.parallel.train: stall_timeout must be a number of seconds or None, got %s"
                    % type(stall_timeout).__name__
                )
            if not (math.isfinite(stall_timeout) and stall_timeout > 0):
                raise ValueError(
                    "dyn.parallel.train: stall_timeout must be > 0 seconds (None: never), got %r"
                    % (stall_timeout,)
                )
            stall_timeout = float(stall_timeout)
        self.stall_timeout = stall_timeout


def split_batch(batch, size, costs=None):
    """The global batch's example indices split over ``size`` ranks (the same on every rank).

    Without costs: consecutive runs of nearly equal counts. With costs (one per
    example of the data set): largest first, each to the rank with the least
    total so far, so no rank waits long for another at the step's all-reduce
    (the summed gradient, and so the training, is the same however it is split).
    """
    if costs is None:
        return np.array_split(batch, size)
    loads, parts = np.zeros(size), [[] for _ in range(size)]
    for i in batch[np.argsort(-costs[batch], kind="stable")]:
        r = int(np.argmin(loads))
        parts[r].append(i)
        loads[r] += costs[i]
    return [np.sort(np.asarray(p, dtype=batch.dtype)) for p in parts]


def example_costs(data, cost):
    """cost(example) for every example, as floats (None without a cost function)."""
    if cost is None:
        return None
    costs = np.array([float(cost(x)) for x in data])
    bad = np.flatnonzero(~np.isfinite(costs) | (costs < 0))
    if bad.size:
        raise ValueError(
            "dyn.parallel.train: cost must give a finite number >= 0 for every example; "
            "example %d gave %r" % (bad[0], float(costs[bad[0]]))
        )
    return costs


class TrainResult(dict):
    """What a run did, as a dict with attribute access: examples, units (the
    counts loss_fn returned; examples when it returned none), steps, loss (mean
    per unit), seconds, units_per_s, examples_per_s, dev (list of {"epoch",
    "step", **metrics}), workers, mode."""

    __getattr__ = dict.__getitem__


def epoch_order(n, seed, epoch):
    """The example order of an epoch: one permutation from (seed, epoch), the same on every rank."""
    return np.random.RandomState((seed * 1000003 + epoch) % (2**32)).permutation(n)


def batch_loss(loss_fn, batch):
    """Forward and backward of one batch: (loss value, units); nothing for an empty batch."""
    if not batch:
        return 0.0, 0
    dy.renew_cg()
    out = loss_fn(batch)
    loss, units = out if isinstance(out, tuple) else (out, len(batch))
    if not isinstance(loss, dy.Expression):
        raise TypeError(
            "dyn.parallel.train: loss_fn must return an Expression or (Expression, count), "
            "got %s" % type(loss).__name__
        )
    value = loss.value()
    if not math.isfinite(value):
        raise FloatingPointError(
            "dyn.parallel.train: loss_fn returned %r on a batch of %d examples" % (value, len(batch))
        )
    loss.backward()
    return float(value), int(units)


class Reporter:
    """Rank 0's side of a run: the progress bar, the dev callback, saving."""

    def __init__(self, cfg, model, total, active):
        self.cfg, self.model, self.active = cfg, model, active
        self.dev_history = []
        self.t0 = time.perf_counter()
        self.bar = None
        if active and cfg.progress:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="ex", dynamic_ncols=True, leave=True)

    def show(self, done, loss, units):
        seconds = time.perf_counter() - self.t0
        if self.bar is not None:
            self.bar.update(done - self.bar.n)
            self.bar.set_postfix(
                loss="%.4f" % (loss / max(units, 1)),
                units_s="%.0f" % (units / max(seconds, 1e-9)),
                refresh=False,
            )

    def epoch_end(self, epoch, step):
        if not self.active:
            return
        if self.cfg.dev is not None and not (self.dev_history and self.dev_history[-1]["step"] == step):
            self.run_dev(epoch, step)
        if self.cfg.save:
            self.model.save(self.cfg.save)

    def run_dev(self, epoch, step):
        dy.renew_cg()
        metrics = self.cfg.dev()
        if not isinstance(metrics, dict):
            raise TypeError(
                "dyn.parallel.train: dev must return a dict of metrics, got %s" % type(metrics).__name__
            )
        self.dev_history.append(dict(epoch=epoch, step=step, **metrics))
        if self.bar is not None:
            self.bar.write(
                "epoch %d step %d dev: %s"
                % (
                    epoch,
                    step,
                    ", ".join(
                        "%s=%.4g" % (k, v) if isinstance(v, float) else "%s=%s" % (k, v)
                        for k, v in metrics.items()
                    ),
                )
            )

    def close(self, stopped_early):
        """Rank 0 saves a run that stopped early (Ctrl-C, an error): the model as
        of its last completed step (ParameterCollection.save writes atomically)."""
        if self.active and self.cfg.save and stopped_early:
            self.model.save(self.cfg.save)
        if self.bar is not None:
            self.bar.close()


class StopFlag:
    """Set by SIGINT (Ctrl-C) while a loop runs in the main thread, read at step ends,
    so a step is never cut in half; restores the previous handler when closed."""

    def __init__(self, install=True, on_set=None):
        self.set = False
        self.old, self.on_set = None, on_set
        if install and threading.current_thread() is threading.main_thread():
            self.old = signal.signal(signal.SIGINT, self._handler)

    def _handler(self, signum, frame):
        if self.set:  # a second Ctrl-C: stop now
            raise KeyboardInterrupt
        self.set = True
        if self.on_set is not None:
            self.on_set()

    def close(self):
        if self.old is not None:
            signal.signal(signal.SIGINT, self.old)
            self.old = None


def run_sync(loss_fn, data, trainer, exchange: Exchange, cfg: Config, stop: StopFlag | None = None):
    """The synchronous loop of rank ``exchange.rank`` of ``exchange.size``, in this process.

    Every rank calls it with the same data, trainer settings and config; rank 0
    shows progress, calls ``cfg.dev`` and saves. Returns a TrainResult (global
    figures, the same on every rank; dev history on rank 0). A Ctrl-C on any
    rank stops every rank after the step in progress; then rank 0 saves and
    KeyboardInterrupt is raised on every rank.
    """
    with blas_share(exchange.local_size):
        return _run_sync(loss_fn, data, trainer, exchange, cfg, stop)


def _run_sync(loss_fn, data, trainer, exchange, cfg, stop):
    data = data if isinstance(data, list) else list(data)
    rank, size, model = exchange.rank, exchange.size, trainer.model
    if rank > 0:  # other dropout masks than rank 0's (forked workers share its RNG state)
        dy.reset_random_seed(cfg.seed * 7919 + rank + 1)
    broadcast_parameters(model, exchange, 0, trainer)
    own_stop = stop is None
    stop = StopFlag() if own_stop else stop
    report = Reporter(cfg, model, cfg.epochs * len(data), rank == 0)
    total = np.zeros(4)  # loss, units, examples, steps (global)
    stats = np.zeros(4)  # per step: loss, units, examples, stop votes
    gb = cfg.batch_size * size
    if cfg.costs is None and size > 1:
        cfg.costs = example_costs(data, cfg.cost)
    costs = cfg.costs if size > 1 else None
    interrupted = failed = False
    try:
        for epoch in range(cfg.epochs):
            order = epoch_order(len(data), cfg.seed, epoch)
            for start in range(0, len(data), gb):
                part = split_batch(order[start : start + gb], size, costs)[rank]
                value, units = batch_loss(loss_fn, [data[i] for i in part])
                sync_gradients(model, exchange, cfg.average)
                trainer.update()
                stats[:] = (value, units, len(part), 1.0 if stop.set else 0.0)
                exchange.allreduce_sum(stats)
                total[:3] += stats[:3]
                total[3] += 1
                report.show(int(total[2]), total[0], total[1])
                if stats[3] > 0:
                    interrupted = True
                    break
                if cfg.dev_every and int(total[3]) % cfg.dev_every == 0 and rank == 0 and cfg.dev:
                    report.run_dev(epoch, int(total[3]))
            if interrupted:
                break
            report.epoch_end(epoch, int(total[3]))
    except BaseException:
        failed = True
        clear_gradients(model)  # the step that failed may have left partial gradients
        raise
    finally:
        if own_stop:
            stop.close()
        report.close(interrupted or failed)
    if interrupted:
        raise KeyboardInterrupt("dyn.parallel.train: interrupted after step %d" % int(total[3]))
    return make_result(total, time.perf_counter() - report.t0, report.dev_history, size, "sync")


def clear_gradients(model):
    """Zero the model's gradients and touched rows (what trainer.update() would consume)."""
    for pool, a, b in pool_runs(model, dense_only=False):
        pool.grads[a:b] = 0
    for p in model.lookup_parameters_list():
        p.clear_touched()


def make_result(total, seconds, dev_history, workers, mode):
    loss, units, examples, steps = (float(x) for x in total)
    return TrainResult(
        examples=int(examples),
        units=int(units),
        steps=int(steps),
        loss=loss / max(units, 1),
        seconds=seconds,
        units_per_s=units / max(seconds, 1e-9),
        examples_per_s=examples / max(seconds, 1e-9),
        dev=dev_history,
        workers=workers,
        mode=mode,
    )
