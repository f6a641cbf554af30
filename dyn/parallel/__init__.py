"""Data-parallel training on one machine (worker processes) or over an Exchange.

``train(loss_fn, data, trainer, workers=N, mode=...)`` trains the trainer's
model on ``data`` with N processes (this one is worker 0; the others are
forked from it, so they inherit the model as built):

* ``mode="async"``: Hogwild. The parameter values and the trainer's state live
  in memory shared by every worker, each worker takes its share of every epoch
  and updates them without locks, as the DyNet paper's multi-processing does.
* ``mode="sync"``: every step each worker computes the gradient of its part of a
  global batch of ``workers * batch_size`` examples, the gradients are summed
  over workers (lookup tables: touched rows only, merged by index) and every
  worker applies the same update, so N workers on batches of B train exactly
  like one process on batches of N*B (to float32 rounding).

``train(..., exchange=ex)`` runs the synchronous loop in this process as rank
``ex.rank`` of ``ex.size`` (for transports across machines, e.g. MPI).
See docs/parallel.md.
"""

from __future__ import annotations

from dyn.parallel._errors import WorkerError, WorkerStalledError
from dyn.parallel._exchange import Exchange, SingleProcess
from dyn.parallel._mpi import MpiExchange  # imports mpi4py only when one is made
from dyn.parallel._sync import Config, TrainResult, broadcast_parameters, run_sync, sync_gradients

__all__ = [
    "train",
    "sync_gradients",
    "broadcast_parameters",
    "Exchange",
    "SingleProcess",
    "TrainResult",
    "WorkerError",
    "WorkerStalledError",
    "MpiExchange",
]


def train(
    loss_fn,
    data,
    trainer,
    *,
    workers=1,
    mode="async",
    batch_size=1,
    epochs=1,
    dev=None,
    dev_every=None,
    save=None,
    seed=0,
    progress=True,
    average=False,
    cost=None,
    exchange=None,
    stall_timeout=60.0,
):
    """Train ``trainer.model`` on ``data`` with ``workers`` processes.

    Args:
        loss_fn: ``loss_fn(batch)`` gets a list of examples (always a list, of
            at most batch_size) and returns the batch's loss as a scalar
            Expression, or ``(loss, count)`` where count is the number of units
            (e.g. words) the loss sums over, for the per-unit loss and units/s
            shown. ``dy.renew_cg()`` is called before each call.
        data: a sequence of examples (shuffled every epoch from ``seed``).
        trainer: a dyn trainer; its ``model`` is what is trained and saved.
        workers: number of processes (1: this process only, no fork).
        mode: "async" (Hogwild, shared parameters) or "sync" (summed gradients).
        batch_size: examples per worker per step.
        epochs: passes over the data.
        dev: ``dev()`` -> dict of metrics, called by worker 0 at every epoch
            end (and every ``dev_every`` steps); the history is in the result.
        save: a path: the model is saved there (atomically) at every epoch end
            and when a run is interrupted or stopped by a worker's error or
            stall (worker 0's included): then the parameters at the moment of
            the stop (docs/parallel.md says exactly which).
        seed: the shuffling seed (the same order on every worker).
        progress: show a tqdm bar (examples, loss per unit, units/s).
        average: sync mode: average the workers' gradients instead of summing
            them (for a loss_fn that returns a mean over its batch).
        cost: sync mode: ``cost(example)`` -> its work (a sentence's length,
            say); each global batch is then split so the workers' total costs
            are even rather than their example counts (a worker may get more
            or fewer than batch_size examples). The training is the same;
            only the time workers spend waiting for each other changes.
        exchange: run the synchronous loop in this process as rank
            ``exchange.rank`` of ``exchange.size`` (workers and mode ignored).
        stall_timeout: seconds after which a worker process that makes no
            progress (finishes no step, does not wait at a barrier, uses no
            CPU time: stopped with SIGSTOP, say, or blocked) is reported as
            WorkerStalledError and the run stopped; None never does. A worker
            that computes or waits for the others is never stalled, however
            long its step or worker 0's dev. Local workers only (with
            ``exchange``, the MPI launcher deals with ranks that hang or die).

    Returns:
        TrainResult: examples, units, steps, loss (mean per unit), seconds,
        units_per_s, examples_per_s, dev (history), workers, mode.

    Raises:
        WorkerError: a worker raised (with its traceback) or was killed; the
            other workers are stopped first. With ``save``, the model is
            saved before it is raised (also when worker 0 raised).
        WorkerStalledError: a worker made no progress for ``stall_timeout``
            seconds (its rank, pid and state are attributes).
        KeyboardInterrupt: after Ctrl-C, once every worker has stopped after
            its current step (and the model was saved, if ``save`` was given).

    Example:
        def loss_fn(batch):
            return dy.esum([tagger.loss(words, tags) for words, tags in batch])
        dy.parallel.train(loss_fn, train_set, dy.AdamTrainer(m), workers=2, mode="sync", batch_size=16)
    """
    cfg = Config(batch_size, epochs, dev, dev_every, save, seed, progress, average, cost, stall_timeout)
    if exchange is not None:
        return run_sync(loss_fn, data, trainer, exchange, cfg)
    if mode not in ("async", "sync"):
        raise ValueError('dyn.parallel.train: mode must be "async" or "sync", got %r' % (mode,))
    if int(workers) < 1:
        raise ValueError("dyn.parallel.train: workers must be >= 1, got %r" % (workers,))
    if int(workers) == 1:
        result = run_sync(loss_fn, data, trainer, SingleProcess(), cfg)
        result["mode"] = mode
        return result
    _check_devices(trainer, mode)
    from dyn.parallel import _local

    return _local.train_local(loss_fn, data, trainer, int(workers), mode, cfg)


def _check_devices(trainer, mode):
    """Local worker processes are forked from this one: parameters on a device need the
    synchronous mode (async shares them in host memory), and a CUDA GPU does not survive a fork
    (each rank must be its own process: run under MPI and pass its exchange)."""
    from dyn.parallel._sync import model_params

    devices = sorted({p.pool.device for p in model_params(trainer.model)} - {"CPU"})
    if not devices:
        return
    if mode == "async":
        raise ValueError("dyn.parallel.train: mode=\"async\" shares the parameters in host memory, but "
                         "some live on %s: use mode=\"sync\"" % ", ".join(devices))
    import dyn._core.gpu as _gpu

    if _gpu.current() is not None and _gpu.current().is_gpu:
        raise RuntimeError("dyn.parallel.train: local workers are forked from this process, and a CUDA "
                           "context does not survive a fork; with parameters on %s run one process per "
                           "rank under MPI (mpirun -n N python train.py, passing "
                           "exchange=dyn.parallel.MpiExchange()): several ranks may share one GPU"
                           % ", ".join(devices))
