"""Learning-rate decay when the dev metric stops improving.

Example:
    decay = training.ReduceLROnPlateau(trainer, factor=0.5, patience=1)
    for epoch in range(20):
        train_one_epoch()
        decay.step(dev_accuracy())     # halves trainer.learning_rate after 2 flat epochs
"""

from __future__ import annotations

import math

from dyn.training._early import check_mode, is_better


class ReduceLROnPlateau:
    """Multiply the trainer's learning rate by `factor` after `patience`
    evaluations without improvement (then wait `cooldown` evaluations).

    Args:
        trainer: a dyn trainer (its ``learning_rate`` is changed).
        factor: the multiplier, in (0, 1).
        patience: evaluations without improvement before a reduction.
        mode: "max" (accuracy) or "min" (loss).
        min_delta: smallest change that counts as an improvement.
        min_lr: the learning rate never goes below this.
        cooldown: evaluations after a reduction during which no other happens.

    Attributes:
        history: the learning rate after each step() (for plots).
        reductions: the steps (0-based) at which it was reduced.
    """

    def __init__(self, trainer, factor=0.5, patience=1, mode="max", min_delta=0.0, min_lr=0.0, cooldown=0):
        check_mode("ReduceLROnPlateau", mode)
        if not 0.0 < factor < 1.0:
            raise ValueError("ReduceLROnPlateau: factor must be in (0, 1), got %r" % (factor,))
        self.trainer, self.factor, self.patience = trainer, float(factor), int(patience)
        self.mode, self.min_delta, self.min_lr, self.cooldown = (
            mode,
            float(min_delta),
            float(min_lr),
            int(cooldown),
        )
        self.best, self.bad_steps, self.wait, self.steps = None, 0, 0, 0
        self.history, self.reductions = [], []

    def step(self, metric):
        """Record one dev evaluation; returns True if the rate was reduced now."""
        metric = float(metric)
        if math.isnan(metric):
            raise ValueError("ReduceLROnPlateau.step: the dev metric is NaN (step %d)" % self.steps)
        reduced = False
        if is_better(self.mode, metric, self.best, self.min_delta):
            self.best, self.bad_steps = metric, 0
        else:
            self.bad_steps += 1
        if self.wait > 0:
            self.wait -= 1
            self.bad_steps = 0
        elif self.bad_steps > self.patience:
            lr = self.trainer.learning_rate
            new = max(lr * self.factor, self.min_lr)
            if new < lr:
                self.trainer.learning_rate = new
                self.reductions.append(self.steps)
                reduced = True
            self.bad_steps, self.wait = 0, self.cooldown
        self.history.append(self.trainer.learning_rate)
        self.steps += 1
        return reduced
