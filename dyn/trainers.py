"""Trainers: update every parameter of a collection from its gradient.

Lookup tables are updated sparsely by default: only the rows touched since
the last update move, so a step costs what the minibatch touched, not the
vocabulary size.
"""

from __future__ import annotations

import math
import sys

from dyn._core import _k_train


class Trainer:
    """Base of all trainers (not constructed directly)."""

    def __init__(self, m, learning_rate):
        if type(self) is Trainer:
            raise TypeError("Trainer is abstract: use e.g. SimpleSGDTrainer")
        self.model = m
        self.learning_rate = float(learning_rate)
        self.clip_threshold = 5.0
        self.clipping_enabled = True
        self.sparse_updates = True
        self.clips = 0
        self.updates = 0
        self.clips_since_status = 0
        self.updates_since_status = 0

    # DyNet's accessors
    def set_sparse_updates(self, su):
        """Update only touched lookup rows (default True)."""
        self.sparse_updates = bool(su)

    def get_sparse_updates(self):
        return self.sparse_updates

    def set_clip_threshold(self, thr):
        """Clip the global gradient norm to thr; thr <= 0 disables clipping."""
        thr = float(thr)
        self.clipping_enabled = thr > 0
        self.clip_threshold = thr

    def get_clip_threshold(self):
        return self.clip_threshold

    def set_learning_rate(self, lr):
        self.learning_rate = float(lr)

    def restart(self, learning_rate=None):
        if learning_rate is not None:
            self.learning_rate = float(learning_rate)

    def update_epoch(self, r=1.0):
        """Deprecated in DyNet; does nothing."""

    def status(self):
        sys.stderr.write(
            "[epoch=0 eta=%g clips=%d updates=%d] "
            % (self.learning_rate, self.clips_since_status, self.updates_since_status)
        )
        self.clips_since_status = self.updates_since_status = 0

    def _params(self):
        return [p for p in self.model.parameters_list() + self.model.lookup_parameters_list() if p.updated]

    def _clip_scale(self, params):
        if not self.clipping_enabled:
            return 1.0
        sq = sum(_k_train.grad_sq_norm(p, self.sparse_updates) for p in params)
        if not math.isfinite(sq):
            bad = [p.name() for p in params if _k_train.has_nonfinite_grad(p)]
            raise RuntimeError("the gradient of %s holds NaN or Inf" % ", ".join(bad or ["a parameter"]))
        norm = math.sqrt(sq)
        if norm > self.clip_threshold:
            self.clips += 1
            self.clips_since_status += 1
            return self.clip_threshold / norm
        return 1.0

    def update(self):
        """Apply one step from the accumulated gradients, then clear them."""
        params = self._params()
        scale = self._clip_scale(params)
        self._step(params, scale)
        self.updates += 1
        self.updates_since_status += 1

    def _step(self, params, scale):
        raise NotImplementedError


class SimpleSGDTrainer(Trainer):
    """Stochastic gradient descent: theta -= learning_rate * g.

    Args:
        m: the ParameterCollection to train.
        learning_rate: step size (DyNet default 0.1).
    """

    def __init__(self, m, learning_rate=0.1, e0=None):
        super().__init__(m, e0 if e0 is not None else learning_rate)

    def _step(self, params, scale):
        lr = self.learning_rate * scale
        for p in params:
            _k_train.sgd_step(p, lr, self.sparse_updates)
