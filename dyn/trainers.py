"""Trainers: DyNet's optimizers over a ParameterCollection.

A trainer updates every Parameters and LookupParameters of its collection
(sub-collections included, parameters added after it was made too) from the
accumulated gradients, then clears them. Lookup tables are updated sparsely
by default: a step costs the rows the minibatch touched, not the vocabulary,
and is nevertheless *exact*: rows left idle are brought up to date the moment
anything reads them (a lookup, the table used whole, as_array, saving), with
the closed forms described in dyn/_core/train/catchup.pyx, so sparse training gives the
values dense training gives (to float32 precision). ``set_sparse_updates(True,
exact=False)`` gives DyNet's approximate sparse updates (idle rows keep their
optimizer state frozen); ``set_sparse_updates(False)`` updates whole tables.

Weight decay (``--dynet-weight-decay L``, ``m.set_weight_decay(L)``) is DyNet's:
after each update every trained value is multiplied by (1 - L). Idle lookup
rows get it lazily through a global scale (a sparse step stays sparse). For
adaptive rules, ``set_l2(L)`` instead adds L * w to the gradient before the
rule (L2 regularisation coupled through the rule's preconditioner).

Example:
    trainer = dy.AdamTrainer(m, alpha=0.001)
    loss.backward()
    trainer.update()
"""

from __future__ import annotations

import math
import sys
from array import array

import numpy as np

from dyn._core.train import catchup as _k_catchup
from dyn._core.train import update as _k_train

__all__ = [
    "Trainer",
    "SimpleSGDTrainer",
    "CyclicalSGDTrainer",
    "MomentumSGDTrainer",
    "AdagradTrainer",
    "AdadeltaTrainer",
    "RMSPropTrainer",
    "AdamTrainer",
    "AmsgradTrainer",
    "EGTrainer",
    "SMORMS3Trainer",
]


class Trainer:
    """Base of all trainers (not constructed directly).

    Attributes:
        learning_rate: the global learning rate (read/write).
        updates, clips: update() calls and clipped updates so far.
    """

    _rule = None  # name of the rule in dyn/_core/train/catchup.pyx (RULES)
    _state_names = ()  # names of the rule's per-element state arrays

    def __init__(self, m, learning_rate, **consts):
        if type(self) is Trainer:
            raise TypeError("Trainer is abstract: use e.g. SimpleSGDTrainer")
        self.model = m
        self._hyper = _k_catchup.Hyper(self._rule, float(learning_rate), **consts)
        self._consts = consts  # the rule's constants, for display
        self.clip_threshold = 5.0
        self.clipping_enabled = True
        self.sparse_updates = True
        self.clips = self.updates = 0
        self.clips_since_status = self.updates_since_status = 0
        self._states = {}  # id(parameter) -> _k_catchup.PState, grown lazily
        self._norms = array("d")  # global gradient norm of each update (see grad_norm_history)
        self._record_norms = None  # None: when clipping computes the norm anyway

    # ------------------------------------------------------------ DyNet's accessors
    @property
    def learning_rate(self):
        return self._hyper.lr

    @learning_rate.setter
    def learning_rate(self, lr):
        self._hyper.lr = float(lr)

    def set_learning_rate(self, lr):
        self.learning_rate = lr

    def set_sparse_updates(self, su, exact=None):
        """Update only the touched rows of lookup tables (default True).

        Args:
            su: False updates whole tables at every step.
            exact: with sparse updates, bring idle rows up to date before
                they are read (default True: values equal dense updates);
                False is DyNet's approximation (idle rows' state is frozen).
        """
        self.sparse_updates = bool(su)
        if exact is not None and bool(exact) != self._hyper.exact:
            for s in self._states.values():
                s.flush()  # rows idle so far follow the old setting
            self._hyper.exact = bool(exact)

    def get_sparse_updates(self):
        return self.sparse_updates

    def set_clip_threshold(self, thr):
        """Clip the global gradient norm to thr; thr <= 0 disables clipping
        (and, as in DyNet, the NaN/Inf check that comes with the norm)."""
        thr = float(thr)
        self.clipping_enabled = thr > 0
        self.clip_threshold = thr if thr > 0 else 0.0

    def get_clip_threshold(self):
        return self.clip_threshold

    def set_l2(self, lam):
        """L2 regularisation coupled into the rule: g += lam * w before each
        step (for Adam this is Adam's L2, not DyNet's decoupled weight decay).
        Sparse lookup steps regularise the touched rows only."""
        lam = float(lam)
        if lam < 0:
            raise ValueError("set_l2: lambda must be >= 0, got %g" % lam)
        self._hyper.l2 = lam

    def get_l2(self):
        return self._hyper.l2

    def whoami(self):
        return type(self).__name__

    # ------------------------------------------------------------ gradient-norm history
    def set_grad_norm_history(self, on=True):
        """Record the global gradient norm (before clipping) of every update.

        By default (``on=None``) a norm is recorded whenever clipping is enabled:
        clipping computes it anyway, so the record costs one float per update.
        With clipping disabled nothing is computed, unless ``on=True`` asks for
        it: then every update pays one extra pass over the gradients to compute
        the norm. ``on=False`` records nothing.

        Args:
            on: True (always record), False (never), None (when it is free).
        """
        self._record_norms = None if on is None else bool(on)

    def grad_norm_history(self):
        """The recorded gradient norms, one per update, as a float64 numpy array
        (see set_grad_norm_history); dyn.training.plot_grad_norms draws them."""
        return np.frombuffer(self._norms, dtype=np.float64).copy() if self._norms else np.zeros(0)

    def clear_grad_norm_history(self):
        del self._norms[:]

    def _repr_html_(self):
        from dyn import display

        return display.trainer_html(self)

    def __repr__(self):
        from dyn import display

        return display.trainer_text(self)

    def settings(self):
        """The trainer's settings as a dict (what a notebook shows)."""
        from dyn import display

        return display.trainer_settings(self)

    def restart(self, learning_rate=None):
        """Zero the optimizer state (momenta, moments); optionally set the rate."""
        for s in self._states.values():
            s.flush()
            s.zero()
        if learning_rate is not None:
            self.learning_rate = learning_rate

    def update_epoch(self, r=1.0):
        """Deprecated in DyNet; does nothing."""
        sys.stderr.write(
            "Trainer::update_epoch has been deprecated and doesn't do anything. Control the "
            "learning rate directly, e.g. trainer.learning_rate /= (1 - rate_decay)\n"
        )

    def status(self):
        """Print [lr=... clips=... updates=...] to stderr and reset those counts."""
        sys.stderr.write(
            "[lr=%g clips=%d updates=%d] "
            % (self.learning_rate, self.clips_since_status, self.updates_since_status)
        )
        self.clips_since_status = self.updates_since_status = 0

    # ------------------------------------------------------------ updates
    def update(self):
        """One step of every trained parameter from its gradient (then cleared)."""
        self._update(self._params())

    def update_subset(self, updated_params, updated_lookups):
        """One step of the given parameters only (indices into the collection's
        parameters_list()/lookup_parameters_list(), or the objects); the others
        keep their gradients. Clipping uses the norm of the updated gradients."""
        chosen = self._pick(updated_params, self.model.parameters_list(), "updated_params")
        chosen += self._pick(updated_lookups, self.model.lookup_parameters_list(), "updated_lookups")
        self._update([p for p in chosen if p.updated])

    @staticmethod
    def _pick(items, plist, what):
        out = []
        for i in items:
            if isinstance(i, (int, np.integer)):
                if not 0 <= i < len(plist):
                    raise IndexError("update_subset: %s index %d out of range (%d)" % (what, i, len(plist)))
                i = plist[i]
            elif not any(i is p for p in plist):
                raise ValueError("update_subset: %s is not in the trainer's collection" % (i,))
            if not any(i is q for q in out):
                out.append(i)
        return out

    def _params(self):
        m = self.model
        return [p for p in m.parameters_list() + m.lookup_parameters_list() if p.updated]

    def _state(self, p):
        s = self._states.get(id(p))
        if s is None or s.p is not p:
            s = self._states[id(p)] = _k_catchup.PState(p, self._hyper)
        if p.is_lookup and p.catch_up_state is not s:
            s.install()
        return s

    def _weight_decay(self):
        # the collection's lambda (its default is --dynet-weight-decay)
        lam = self.model.get_weight_decay()
        if not 0.0 <= lam < 1.0:
            raise ValueError("weight decay must be in [0, 1), got %g" % lam)
        return lam

    def _clip_scale(self, params):
        record = self._record_norms
        if not self.clipping_enabled:
            if record:  # history asked for: pay for the norm clipping would have computed
                self._norms.append(math.sqrt(sum(_k_train.grad_sq_norm(p) for p in params)))
            return 1.0
        sq = sum(_k_train.grad_sq_norm(p) for p in params)
        if record is not False:
            self._norms.append(math.sqrt(sq))
        if not math.isfinite(sq):
            bad = [p.name() for p in params if _k_train.has_nonfinite_grad(p)]
            raise RuntimeError(
                "Magnitude of gradient is bad: the gradient of %s holds NaN or Inf"
                % ", ".join(bad or ["a parameter"])
            )
        norm = math.sqrt(sq)
        if norm > self.clip_threshold:
            self.clips += 1
            self.clips_since_status += 1
            return self.clip_threshold / norm
        return 1.0

    def _update(self, params):
        states = [self._state(p) for p in params]
        lam = self._weight_decay()
        scale = self._clip_scale(params)
        self._hyper.begin_step(self.updates + 1, lam, scale)
        for s in states:
            _k_train.step(s, self.sparse_updates)
        self.updates += 1
        self.updates_since_status += 1
        self._after_update()

    def _after_update(self):
        pass

    # ------------------------------------------------------------ state for saving
    def _scalars(self):
        return {"updates": self.updates, "clips": self.clips, "learning_rate": self.learning_rate}

    def _set_scalars(self, d):
        self.updates, self.clips = int(d["updates"]), int(d["clips"])
        self.learning_rate = float(d["learning_rate"])

    def state_dict(self):
        """The trainer's state as {name: numpy array}: "#updates", "#clips",
        "#learning_rate" ..., and per parameter "<name>#<state>" (e.g. "/E#m"),
        for lookup tables also "<name>#last" (per-row last-update step),
        "<name>#clock" (table steps) and "<name>#schedule". Idle rows are
        brought up to date first, so values saved before or after match it."""
        d = {"#" + k: np.array(v) for k, v in self._scalars().items()}
        for s in self._states.values():
            s.flush()
            name = s.p.name()
            for i, field in enumerate(self._state_names[: len(s.arrays)]):
                d["%s#%s" % (name, field)] = s.host_array(i)  # a host copy on every device
            if s.p.is_lookup:
                d[name + "#last"] = s.last.copy()
                d[name + "#clock"] = np.array([s.base, s.tloc], dtype=np.int64)
                d[name + "#schedule"] = s.segs[: s.nseg].copy()
        return d

    def load_state_dict(self, d):
        """Restore state_dict(); names and shapes are checked first and
        nothing changes if anything does not match."""
        params = {p.name(): p for p in self.model.parameters_list() + self.model.lookup_parameters_list()}
        scalars, per = {}, {}
        for key, v in d.items():
            name, _, field = key.rpartition("#")
            a = np.asarray(v)
            if name == "":
                if field not in self._scalars():
                    raise ValueError("load_state_dict: unknown entry %r for %s" % (key, self.whoami()))
                scalars[field] = a
                continue
            p = params.get(name)
            if p is None:
                raise ValueError("load_state_dict: %r is not a parameter of the trainer's collection" % name)
            want = self._entry_shape(p, field, a)
            if want is None:
                raise ValueError("load_state_dict: unknown entry %r for %s" % (key, self.whoami()))
            if a.shape != want:
                raise ValueError("load_state_dict: %r has shape %r, expected %r" % (key, a.shape, want))
            per.setdefault(name, {})[field] = a
        missing = [k for k in self._scalars() if k not in scalars]
        if missing:
            raise ValueError("load_state_dict: missing %s" % ", ".join("#" + k for k in missing))
        for name, fields in per.items():
            p = params[name]
            s = self._states[id(p)] = _k_catchup.PState(p, self._hyper)
            for field, a in fields.items():
                if field in self._state_names:
                    s.set_array(self._state_names.index(field), a)  # through the device array
            if p.is_lookup:
                clock = fields.get("clock", np.zeros(2, np.int64))
                s.set_schedule(fields.get("schedule", np.zeros((0, 5))), int(clock[0]), int(clock[1]))
                if "last" in fields:
                    s.last[:] = fields["last"]
                s.install()
        self._set_scalars(scalars)

    def _entry_shape(self, p, field, a):
        if field in self._state_names:
            return (p.size,)
        if p.is_lookup and field == "last":
            return (p.nrows,)
        if p.is_lookup and field == "clock":
            return (2,)
        if p.is_lookup and field == "schedule":
            return (a.shape[0] if a.ndim == 2 else -1, 5)
        return None


class _Cyclical:
    """DyNet's cyclical learning rate: after each update
    lr = lr_min + (lr_max - lr_min) * max(0, 1 - x) * gamma**it."""

    def _cycle(self):
        it, step = self.it, self.step_size
        cycle = math.floor(1 + it / (2 * step))
        x = abs(it / step - 2 * cycle + 1)
        self.learning_rate = (
            self.learning_rate_min
            + (self.learning_rate_max - self.learning_rate_min) * max(0.0, 1 - x) * self.gamma**it
        )
        self.it += 1

    # the schedule's position is part of the saved state (a resumed run continues it)
    def _scalars(self):
        return dict(super()._scalars(), it=self.it)

    def _set_scalars(self, d):
        super()._set_scalars(d)
        self.it = int(d["it"])


class SimpleSGDTrainer(Trainer):
    """Stochastic gradient descent: w -= lr * g.

    Args:
        m: the ParameterCollection to train.
        learning_rate: step size (DyNet default 0.1).
    """

    _rule = "sgd"

    def __init__(self, m, learning_rate=0.1, e0=None):
        super().__init__(m, e0 if e0 is not None else learning_rate)


class CyclicalSGDTrainer(_Cyclical, Trainer):
    """SGD with a cyclical learning rate (Smith 2017), DyNet's schedule: the
    first update uses learning_rate_min; after update it (from 0),
    cycle = floor(1 + it/(2*step_size)), x = |it/step_size - 2*cycle + 1|,
    lr = lr_min + (lr_max - lr_min) * max(0, 1 - x) * gamma**it."""

    _rule = "sgd"

    def __init__(
        self, m, learning_rate_min=0.01, learning_rate_max=0.1, step_size=2000, gamma=1.0, edecay=0.0
    ):
        super().__init__(m, learning_rate_min)
        self.learning_rate_min, self.learning_rate_max = float(learning_rate_min), float(learning_rate_max)
        self.step_size, self.gamma, self.it = float(step_size), float(gamma), 0

    def _after_update(self):
        self._cycle()


class MomentumSGDTrainer(Trainer):
    """SGD with momentum: v = mom * v - lr * g; w += v.

    Args:
        learning_rate: step size (DyNet default 0.01).
        mom: momentum (default 0.9).
    """

    _rule = "momentum"
    _state_names = ("v",)

    def __init__(self, m, learning_rate=0.01, mom=0.9):
        super().__init__(m, learning_rate, mom=float(mom))


class AdagradTrainer(Trainer):
    """Adagrad: G += g^2; w -= lr * g / sqrt(G + eps)."""

    _rule = "adagrad"
    _state_names = ("G",)

    def __init__(self, m, learning_rate=0.1, eps=1e-20):
        super().__init__(m, learning_rate, eps=float(eps))


class AdadeltaTrainer(Trainer):
    """Adadelta (Zeiler): E[g2] = rho E[g2] + (1-rho) g^2;
    d = -g sqrt(E[d2] + eps) / sqrt(E[g2] + eps); E[d2] = rho E[d2] + (1-rho) d^2;
    w += d. No learning rate (DyNet fixes it to 1)."""

    _rule = "adadelta"
    _state_names = ("hg", "hd")

    def __init__(self, m, eps=1e-6, rho=0.95):
        super().__init__(m, 1.0, eps=float(eps), rho=float(rho))


class RMSPropTrainer(Trainer):
    """RMSProp: E = rho E + (1-rho) g^2; w -= lr * g / sqrt(E + eps)
    (DyNet's Python defaults)."""

    _rule = "rmsprop"
    _state_names = ("E",)

    def __init__(self, m, learning_rate=0.001, eps=1e-8, rho=0.9):
        super().__init__(m, learning_rate, eps=float(eps), rho=float(rho))


class AdamTrainer(Trainer):
    """Adam (Kingma & Ba): m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
    w -= alpha sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps), t = update number.

    Sparse lookup updates are exact (idle rows caught up lazily, see the
    module docstring), unlike DyNet's.

    Args:
        alpha: learning rate (positional second argument, as in DyNet).
        beta_1, beta_2: decay of the first and second moment estimates.
        eps: added to the denominator.
    """

    _rule = "adam"
    _state_names = ("m", "v")

    def __init__(self, m, alpha=0.001, beta_1=0.9, beta_2=0.999, eps=1e-8):
        super().__init__(m, alpha, eps=float(eps), beta_1=float(beta_1), beta_2=float(beta_2))


class AmsgradTrainer(Trainer):
    """AMSGrad (Reddi et al.): Adam with vhat = max(vhat, v) in the denominator."""

    _rule = "amsgrad"
    _state_names = ("m", "v", "vhat")

    def __init__(self, m, alpha=0.001, beta_1=0.9, beta_2=0.999, eps=1e-8):
        super().__init__(m, alpha, eps=float(eps), beta_1=float(beta_1), beta_2=float(beta_2))


class EGTrainer(_Cyclical, Trainer):
    """Exponentiated gradient with momentum (DyNet's C++ EGTrainer):
    h = mom * h - lr * g; x = x * exp(h) / sum(x * exp(h)). The sum runs over
    a whole Parameters, and over each row of a lookup table. Values must be
    positive (a distribution).

    Args:
        learning_rate: step size (default 0.1).
        mom: momentum (default 0.9).
        ne: accepted for DyNet compatibility, unused (as in DyNet).
    """

    _rule = "eg"
    _state_names = ("h",)

    def __init__(self, m, learning_rate=0.1, mom=0.9, ne=0.0):
        super().__init__(m, learning_rate, mom=float(mom))
        self.cyclical, self.it = False, 0

    def enableCyclicalLR(self, learning_rate_min=0.01, learning_rate_max=0.1, step_size=2000, gamma=0.0):  # noqa: N802
        """Cyclical learning rate after each update (CyclicalSGDTrainer's schedule)."""
        self.cyclical, self.it = True, 0
        self.learning_rate_min, self.learning_rate_max = float(learning_rate_min), float(learning_rate_max)
        self.step_size, self.gamma = float(step_size), float(gamma)

    def _after_update(self):
        if self.cyclical:
            self._cycle()


class SMORMS3Trainer(Trainer):
    """SMORMS3 (Simon Funk's RMSprop variant, no beta parameters):
    r = 1/(mem+1); g_ = (1-r) g_ + r g; g2 = (1-r) g2 + r g^2;
    w -= g * min(lr, g_^2/(g2+eps)) / (sqrt(g2) + eps); mem = 1 + mem (1 - g_^2/(g2+eps)).

    Args:
        learning_rate: the cap on the per-element rate (default 0.001).
        eps: added to the denominators (default 1e-16).
    """

    _rule = "smorms3"
    _state_names = ("g", "g2", "mem")

    def __init__(self, m, learning_rate=0.001, eps=1e-16):
        super().__init__(m, learning_rate, eps=float(eps))
