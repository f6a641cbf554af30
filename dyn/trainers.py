"""Trainers: update every parameter of a collection from its gradient.

Lookup tables are updated sparsely by default: only the rows touched since
the last update move, so a step costs what the minibatch touched, not the
vocabulary size.
"""

from __future__ import annotations

import math
import sys

import numpy as np

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


class AdamTrainer(Trainer):
    """Adam (Kingma & Ba): per-element step from running moments of g and g^2.

    Every parameter, lookup tables included, takes an exact dense step: Adam's
    moments move even where a gradient is zero, so updating only the touched
    rows (what DyNet does) would not be Adam. Exact *sparse* steps, bringing
    an idle row up to date lazily, are planned (issue 4).

    Args:
        m: the ParameterCollection to train.
        alpha: learning rate.
        beta_1, beta_2: decay of the first and second moment estimates.
        eps: added to the denominator.
    """

    def __init__(self, m, alpha=0.001, beta_1=0.9, beta_2=0.999, eps=1e-8):
        super().__init__(m, alpha)
        self.beta_1, self.beta_2, self.eps = float(beta_1), float(beta_2), float(eps)
        self._state = {}  # parameter -> (first moment, second moment); grows lazily
        self._t = 0

    def restart(self, learning_rate=None):
        super().restart(learning_rate)
        self._state.clear()
        self._t = 0

    def _clip_scale(self, params):
        saved, self.sparse_updates = self.sparse_updates, False  # dense steps: clip the whole gradient
        try:
            return super()._clip_scale(params)
        finally:
            self.sparse_updates = saved

    def _step(self, params, scale):
        self._t += 1
        t = self._t
        lr = self.learning_rate * np.sqrt(1 - self.beta_2**t) / (1 - self.beta_1**t)
        for p in params:
            state = self._state.get(p)
            if state is None:
                dtype = p.value_view().dtype
                state = self._state[p] = (np.zeros(p.size, dtype), np.zeros(p.size, dtype))
            _k_train.adam_step(p, state[0], state[1], lr, self.beta_1, self.beta_2, self.eps, scale)
