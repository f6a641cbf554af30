"""A training loop that puts the tricks together.

``train_epoch`` runs one pass over the data (a fresh graph per minibatch, loss,
backward, update) with a tqdm progress bar showing the loss and examples per
second. ``fit`` runs epochs and, after each, the dev metric, learning-rate
decay, checkpoints and early stopping given to it; everything is optional and
each piece works alone too.

Example:
    def loss_of(batch):                       # a scalar Expression: the summed loss
        return dy.esum([tagger.loss(words, tags) for words, tags in batch])

    log = training.fit(trainer, train, loss_of, epochs=10, batch_size=16,
                       dev_metric=lambda: accuracy(dev), early_stopping=training.EarlyStopping(m),
                       plateau=training.ReduceLROnPlateau(trainer), checkpoints=ckpt)
"""

from __future__ import annotations

import math
import random
import time

import dyn.graph as _graph_api
from dyn.ops._registry import REGISTRY
from dyn.training._normalise import per_batch


def minibatches(data, batch_size, rng=None):
    """Lists of up to batch_size items of data, shuffled by rng (a random.Random) if given."""
    if batch_size < 1:
        raise ValueError("minibatches: batch_size must be >= 1, got %r" % (batch_size,))
    order = list(range(len(data)))
    if rng is not None:
        rng.shuffle(order)
    return [[data[i] for i in order[k : k + batch_size]] for k in range(0, len(order), batch_size)]


def train_epoch(trainer, data, loss_of, batch_size=1, rng=None, normalise=True, progress=True, desc="train"):
    """One pass over data: per minibatch a new graph, ``loss_of(batch)``,
    backward and ``trainer.update()``.

    Args:
        trainer: a dyn trainer.
        data: a sequence of examples.
        loss_of: ``loss_of(batch) -> Expression``, the loss summed over the batch
            (a scalar, or a batched loss: it is summed over its batch).
        batch_size: examples per update.
        rng: a random.Random to shuffle with (None: in order).
        normalise: backpropagate the mean loss of the minibatch (per_batch), so
            the step size does not depend on batch_size; the reported loss is
            the sum either way.
        progress: show a tqdm progress bar (loss per example, examples/s).
        desc: the progress bar's label.

    Returns:
        {"loss": mean loss per example, "examples", "updates", "seconds", "examples_per_s"}.
    """
    batches = minibatches(data, batch_size, rng)
    bar = None
    if progress:
        from tqdm import tqdm  # imported only when a bar is wanted: import dyn stays fast

        bar = tqdm(total=len(data), desc=desc, unit="ex", leave=True, mininterval=0.5)
    total, seen, start = 0.0, 0, time.perf_counter()
    try:
        for batch in batches:
            _graph_api.renew_cg()
            loss = loss_of(batch)
            if loss.dim()[1] > 1:
                loss = REGISTRY["sum_batches"].fn(loss)
            value = loss.scalar_value()
            if not math.isfinite(value):
                raise FloatingPointError("train_epoch: the loss is %r at example %d" % (value, seen))
            (per_batch(loss, len(batch)) if normalise else loss).backward()
            trainer.update()
            total += value
            seen += len(batch)
            if bar is not None:
                bar.update(len(batch))
                bar.set_postfix(loss="%.4f" % (total / seen), refresh=False)
    finally:
        if bar is not None:
            bar.close()
    seconds = time.perf_counter() - start
    return {
        "loss": total / max(seen, 1),
        "examples": seen,
        "updates": len(batches),
        "seconds": seconds,
        "examples_per_s": seen / seconds if seconds > 0 else float("inf"),
    }


def fit(
    trainer,
    data,
    loss_of,
    epochs,
    dev_metric=None,
    batch_size=1,
    seed=0,
    normalise=True,
    early_stopping=None,
    plateau=None,
    checkpoints=None,
    progress=True,
    log=None,
):
    """Train for up to `epochs` epochs with the given tricks.

    After each epoch: the dev metric (``dev_metric()``, if given), then
    ``plateau.step(metric)`` (learning-rate decay), ``checkpoints.save(epoch)``
    and ``early_stopping.step(metric)``; when early stopping says stop, the loop
    ends and the best parameters are restored (``early_stopping.restore()``).

    Args:
        trainer, data, loss_of, batch_size, normalise, progress: as train_epoch.
        epochs: the most epochs to run.
        dev_metric: a function returning the dev score (needed by plateau and
            early_stopping).
        seed: shuffles the data with random.Random(seed) (None: no shuffling).
        early_stopping: an EarlyStopping, or None.
        plateau: a ReduceLROnPlateau, or None.
        checkpoints: a Checkpoints, or None.
        log: a function called with each epoch's record (e.g. print).

    Returns:
        One dict per epoch: epoch, loss, examples_per_s, seconds, dev (if any),
        learning_rate, stopped.
    """
    if (early_stopping or plateau) and dev_metric is None:
        raise ValueError("fit: early_stopping and plateau need dev_metric")
    rng = None if seed is None else random.Random(seed)
    records = []
    for epoch in range(epochs):
        r = train_epoch(trainer, data, loss_of, batch_size, rng, normalise, progress, "epoch %d" % epoch)
        rec = {
            "epoch": epoch,
            "loss": r["loss"],
            "examples_per_s": r["examples_per_s"],
            "seconds": r["seconds"],
            "learning_rate": trainer.learning_rate,
            "stopped": False,
        }
        if dev_metric is not None:
            rec["dev"] = float(dev_metric())
        if plateau is not None:
            plateau.step(rec["dev"])
        if checkpoints is not None:
            checkpoints.save(epoch)
        if early_stopping is not None:
            rec["stopped"] = early_stopping.step(rec["dev"])
        records.append(rec)
        if log is not None:
            log(rec)
        if rec["stopped"]:
            break
    if early_stopping is not None and early_stopping.snapshot is not None:
        early_stopping.restore()
    return records
