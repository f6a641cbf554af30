"""Early stopping on a dev metric, and the snapshots of parameter values it keeps.

Example:
    stopper = training.EarlyStopping(model, patience=3, mode="max")
    for epoch in range(50):
        train_one_epoch()
        if stopper.step(dev_accuracy()):
            break
    stopper.restore()          # the parameters of the best epoch, bit for bit
"""

from __future__ import annotations

import math

import numpy as np


class Snapshot:
    """An exact copy of every parameter value of a collection (lookup tables
    included), taken now.

    A trainer updates idle lookup rows lazily (see dyn.trainers); reading a
    table's values (``value_view``) first brings every row up to date, so the
    copy holds the values dense training would have, and writing them back
    after the same catch-up leaves no pending update to be applied on top.
    """

    def __init__(self, model):
        self.params = model.parameters_list() + model.lookup_parameters_list()
        self.values = [p.value_view().copy() for p in self.params]

    def restore(self):
        """Write the copied values back (gradients are left as they are)."""
        for p, v in zip(self.params, self.values):
            p.write_values(v)  # catches up the table before the write

    def arrays(self):
        """{parameter name: its value as as_array() shows it}."""
        return {p.name(): v.copy() for p, v in zip(self.params, self.values)}


def is_better(mode, value, best, min_delta):
    """Whether value improves on best by more than min_delta ("max" or "min")."""
    if best is None:
        return True
    return value > best + min_delta if mode == "max" else value < best - min_delta


def check_mode(what, mode):
    if mode not in ("max", "min"):
        raise ValueError("%s: mode must be 'max' (accuracy) or 'min' (loss), got %r" % (what, mode))


class EarlyStopping:
    """Stop when the dev metric has not improved for `patience` evaluations,
    and give back the parameters of the best one.

    The best parameters are kept in memory as an exact copy (``Snapshot``) and,
    if ``path`` is given, also saved there atomically (``model.save``) at
    every improvement.

    The trainer: by default it is left as it is at the end (its moments, step
    count and learning rate are those of the last update, not of the best
    epoch): training continued after ``restore()`` starts from the best values
    with the latest optimizer state. With ``trainer=`` and
    ``restore_trainer=True`` the trainer's state (``state_dict``) is copied with
    the best values and restored with them too, learning rate included.

    Args:
        model: the ParameterCollection to watch.
        patience: evaluations without improvement tolerated before stopping.
        mode: "max" (accuracy, F1) or "min" (loss, perplexity).
        min_delta: smallest change that counts as an improvement.
        trainer: the trainer (needed for restore_trainer).
        restore_trainer: also restore the trainer's state of the best epoch.
        path: if given, the best parameters are saved to this file.

    Attributes:
        best, best_step: the best metric and the step (0-based) it came at.
        bad_steps: evaluations since the last improvement.
        stopped: whether step() has said to stop.
    """

    def __init__(self, model, patience=3, mode="max", min_delta=0.0, trainer=None,
                 restore_trainer=False, path=None):  # fmt: skip
        check_mode("EarlyStopping", mode)
        if patience < 0:
            raise ValueError("EarlyStopping: patience must be >= 0, got %r" % (patience,))
        if restore_trainer and trainer is None:
            raise ValueError("EarlyStopping: restore_trainer=True needs the trainer (trainer=...)")
        self.model, self.patience, self.mode, self.min_delta = model, int(patience), mode, float(min_delta)
        self.trainer, self.restore_trainer, self.path = trainer, bool(restore_trainer), path
        self.best = self.best_step = None
        self.bad_steps, self.steps, self.stopped = 0, 0, False
        self.snapshot = self.trainer_state = None

    def step(self, metric):
        """Record one dev evaluation; returns True when training should stop."""
        metric = float(metric)
        if math.isnan(metric):
            raise ValueError("EarlyStopping.step: the dev metric is NaN (step %d)" % self.steps)
        if is_better(self.mode, metric, self.best, self.min_delta):
            self.best, self.best_step, self.bad_steps = metric, self.steps, 0
            self.snapshot = Snapshot(self.model)
            if self.restore_trainer:
                self.trainer_state = {k: np.copy(v) for k, v in self.trainer.state_dict().items()}
            if self.path is not None:
                self.model.save(self.path)
        else:
            self.bad_steps += 1
        self.steps += 1
        self.stopped = self.bad_steps > self.patience
        return self.stopped

    def restore(self):
        """Set the parameters (and with restore_trainer the trainer) to the best step's."""
        if self.snapshot is None:
            raise RuntimeError("EarlyStopping.restore: no evaluation recorded yet (call step(metric) first)")
        self.snapshot.restore()
        if self.trainer_state is not None:
            self.trainer.load_state_dict(self.trainer_state)

    def __repr__(self):
        return "EarlyStopping(mode=%s, patience=%d, best=%s at step %s, bad_steps=%d%s)" % (
            self.mode, self.patience, self.best, self.best_step, self.bad_steps,
            ", stopped" if self.stopped else "")  # fmt: skip
