"""numpy (float64) references of the trainers' update equations (as DyNet documents them).

Each rule is written once, for one tensor: ``Rule(name, **consts)`` then
``rule.step(w, g, t, lr)`` returns the new w (state kept inside), with
t = the 1-based update number. Weight decay multiplies by (1 - wd) after the
step; l2 adds l2 * w to the gradient first. ``rows=True`` normalises EG per
row (lookup tables) instead of over the whole tensor.
"""

import numpy as np


class Rule:
    def __init__(
        self, name, mom=0.9, eps=1e-8, rho=0.9, beta_1=0.9, beta_2=0.999, wd=0.0, l2=0.0, rows=False
    ):
        self.name, self.mom, self.eps, self.rho = name, mom, eps, rho
        self.b1, self.b2, self.wd, self.l2, self.rows = beta_1, beta_2, wd, l2, rows
        self.s = None

    def _init(self, w):
        z = np.zeros_like(w)
        self.s = {"a": z.copy(), "b": z.copy(), "c": z.copy()}
        if self.name == "smorms3":
            self.s["c"] = np.ones_like(w)

    def step(self, w, g, t, lr):
        if self.s is None:
            self._init(w)
        s, w = self.s, np.array(w, dtype=np.float64)
        g = g + self.l2 * w
        n = self.name
        if n == "sgd":
            w = w - lr * g
        elif n == "momentum":
            s["a"] = self.mom * s["a"] - lr * g
            w = w + s["a"]
        elif n == "adagrad":
            s["a"] = s["a"] + g * g
            w = w - lr * g / np.sqrt(s["a"] + self.eps)
        elif n == "adadelta":
            s["a"] = self.rho * s["a"] + (1 - self.rho) * g * g
            d = -g * np.sqrt(s["b"] + self.eps) / np.sqrt(s["a"] + self.eps)
            s["b"] = self.rho * s["b"] + (1 - self.rho) * d * d
            w = w + d
        elif n == "rmsprop":
            s["a"] = self.rho * s["a"] + (1 - self.rho) * g * g
            w = w - lr * g / np.sqrt(s["a"] + self.eps)
        elif n in ("adam", "amsgrad"):
            s["a"] = self.b1 * s["a"] + (1 - self.b1) * g
            s["b"] = self.b2 * s["b"] + (1 - self.b2) * g * g
            v = s["b"]
            if n == "amsgrad":
                s["c"] = np.maximum(s["c"], s["b"])
                v = s["c"]
            lr_t = lr * np.sqrt(1 - self.b2**t) / (1 - self.b1**t)
            w = w - lr_t * s["a"] / (np.sqrt(v) + self.eps)
        elif n == "eg":
            s["a"] = self.mom * s["a"] - lr * g
            y = np.log(w) + s["a"]
            axis = -1 if self.rows else None
            mx = y.max(axis=axis, keepdims=True)
            w = np.exp(y - mx - np.log(np.sum(np.exp(y - mx), axis=axis, keepdims=True)))
        elif n == "smorms3":
            r = 1 / (s["c"] + 1)
            s["a"] = (1 - r) * s["a"] + r * g
            s["b"] = (1 - r) * s["b"] + r * g * g
            a = s["a"] ** 2 / (s["b"] + self.eps)
            w = w - g * np.minimum(lr, a) / (np.sqrt(s["b"]) + self.eps)
            s["c"] = 1 + s["c"] * (1 - a)
        else:
            raise ValueError(n)
        return w * (1 - self.wd)


# trainer class name -> (rule name, constructor kwargs, reference constants, learning rate)
RULES = {
    "SimpleSGDTrainer": ("sgd", {"learning_rate": 0.1}, {}, 0.1),
    "MomentumSGDTrainer": ("momentum", {"learning_rate": 0.05, "mom": 0.8}, {"mom": 0.8}, 0.05),
    "AdagradTrainer": ("adagrad", {"learning_rate": 0.1, "eps": 1e-20}, {"eps": 1e-20}, 0.1),
    "AdadeltaTrainer": ("adadelta", {"eps": 1e-6, "rho": 0.95}, {"eps": 1e-6, "rho": 0.95}, 1.0),
    "RMSPropTrainer": (
        "rmsprop",
        {"learning_rate": 0.01, "eps": 1e-8, "rho": 0.9},
        {"eps": 1e-8, "rho": 0.9},
        0.01,
    ),
    "AdamTrainer": ("adam", {"alpha": 0.01}, {}, 0.01),
    "AmsgradTrainer": ("amsgrad", {"alpha": 0.01}, {}, 0.01),
    "EGTrainer": ("eg", {"learning_rate": 0.1, "mom": 0.5}, {"mom": 0.5}, 0.1),
    "SMORMS3Trainer": ("smorms3", {"learning_rate": 0.01, "eps": 1e-16}, {"eps": 1e-16}, 0.01),
}
STATEFUL = [k for k in RULES if k not in ("SimpleSGDTrainer", "AdagradTrainer")]
