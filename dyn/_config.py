"""Start-up configuration: DyNet's command-line flags and dyn.init().

DyNet reads ``--dynet-*`` flags from ``sys.argv`` at import without removing
them (scripts that use argparse declare them themselves); dyn does the same.
"""

from __future__ import annotations

import os
import sys

from dyn._core import _graph

_FLAGS = ("mem", "seed", "autobatch", "weight-decay", "gpus", "gpu", "devices", "profiling", "viz")
state = {"initialized": False, "autobatch": False, "weight_decay": 0.0, "seed": None}


def parse_flags(argv) -> dict:
    """``--dynet-x V`` / ``--dynet-x=V`` / ``--dynet_x V`` -> {"x": "V"}."""
    out = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--dynet-") or a.startswith("--dynet_"):
            key, eq, val = a[8:].partition("=")
            key = key.replace("_", "-")
            if key in _FLAGS:
                if not eq:
                    if key == "viz":
                        val = "1"
                    elif i + 1 < len(argv):
                        i += 1
                        val = argv[i]
                    else:
                        raise ValueError("flag --dynet-%s needs a value" % key)
                out[key] = val
        i += 1
    return out


def _mem_bytes(spec: str) -> int:
    # DyNet: megabytes, either one number or "fwd,bwd,param[,scratch]"
    parts = [int(p) for p in str(spec).split(",") if p.strip()]
    return max(parts) * (1 << 20) if parts else 0


def _number(what, value, kind):
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ValueError("dyn.init: %s must be %s, got %r" % (what, kind.__name__, value)) from None


def _flag(what, value):
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "on", "off"):
        return value.strip().lower() in ("true", "on")
    return bool(_number(what, value, int))


def init(
    shared_parameters=None,
    *,
    random_seed=None,
    mem=None,
    autobatch=None,
    weight_decay=None,
    precision=None,
    devices=None,
    seed=None,
):
    """Configure dyn from Python, at any time (no command line, no restart).

    Importing dyn already read DyNet's ``--dynet-*`` flags; ``init`` applies
    the keyword options given and leaves the others as they are, so it can be
    called again in a running notebook kernel, and re-running a cell that calls
    it and then builds a model gives the same model (the seed resets the
    initialisers and the dropout/noise generator). What each option changes:

    - random_seed / seed: from now on (parameters created next, dropout next).
    - autobatch: the current graph (recomputed from scratch if it was
      computed the other way) and every later one.
    - precision: every new graph and parameters created from now on; the
      current graph is renewed (its expressions become stale), and parameters
      of the other precision raise a clear error when used.
    - weight_decay: the default of collections created from now on (an
      existing collection: ``pc.set_weight_decay``).
    - mem: the arenas' initial size; the current graph is emptied.

    Example:
        dyn.init(random_seed=1, autobatch=True)
        dyn.current_config()   # {'seed': 1, 'autobatch': True, ...}

    Args:
        shared_parameters: accepted for DyNet compatibility (multi-process
            parameter sharing is not implemented).
        random_seed: seed of dropout/noise sampling and default initialisers.
        mem: initial arena size in MB (DyNet's --dynet-mem); arenas grow anyway.
        autobatch: run new graphs through the automatic batching engine
            (DyNet's --dynet-autobatch); renew_cg(autobatching=...) overrides it.
        weight_decay: accepted for compatibility (applied by trainers later).
        precision: "float32" (default) or "float64" for new graphs/parameters.
        devices: only "CPU" is available in this build.
    """
    if seed is not None and random_seed is not None and int(seed) != int(random_seed):
        raise ValueError("dyn.init: seed=%r and random_seed=%r disagree (give one)" % (seed, random_seed))
    random_seed = random_seed if random_seed is not None else seed
    if devices is not None and "GPU" in str(devices).upper():
        raise RuntimeError("dyn: no GPU support in this build (asked for devices=%r)" % (devices,))
    # check every option before applying any: a bad one changes nothing
    mem_bytes = None
    if mem:
        try:
            mem_bytes = _mem_bytes(mem)
        except ValueError:
            msg = "dyn.init: mem must be megabytes or 'fwd,bwd,param[,scratch]', got %r" % (mem,)
            raise ValueError(msg) from None
    seed_value = None if random_seed is None else _number("random_seed", random_seed, int)
    ab = None if autobatch is None else _flag("autobatch", autobatch)
    wd = None if weight_decay is None else _number("weight_decay", weight_decay, float)
    if wd is not None and not 0.0 <= wd < 1.0:
        raise ValueError("dyn.init: weight_decay must be in [0, 1), got %r" % (weight_decay,))
    if precision is not None and precision not in ("float32", "float64"):
        raise ValueError("dyn.init: precision must be 'float32' or 'float64', got %r" % (precision,))
    if mem:
        _graph.set_initial_memory(mem_bytes)
        state["mem"] = mem_bytes
    if seed_value:  # DyNet: 0 means "no fixed seed"
        set_seed(seed_value)
    if ab is not None:
        from dyn._core import _autobatch  # noqa: F401 (the engine registers itself)

        state["autobatch"] = ab
        _graph.set_autobatching(ab)  # the current graph too
    if wd is not None:
        state["weight_decay"] = wd
    if precision is not None and precision != _graph.get_dtype():
        _graph.set_dtype(precision)
    state["initialized"] = True


def current_config() -> dict:
    """What dyn.init set: seed (None: not fixed), autobatch, weight_decay,
    precision, mem (initial arena bytes, None: the default)."""
    return {
        "seed": state["seed"],
        "autobatch": state["autobatch"],
        "weight_decay": state["weight_decay"],
        "precision": _graph.get_dtype(),
        "mem": state.get("mem"),
    }


def set_seed(seed: int):
    import numpy as np

    from dyn import params

    state["seed"] = seed
    _graph.seed(seed)
    params.seed_initializers(np.random.RandomState(seed))


def init_from_argv():
    flags = parse_flags(sys.argv)
    if any(k in flags for k in ("gpus", "gpu")) and flags.get("gpus", flags.get("gpu")) not in ("0",):
        raise RuntimeError("dyn: built without GPU support, but --dynet-gpus was given")
    env_dtype = os.environ.get("DYN_PRECISION")
    init(
        random_seed=flags.get("seed"),
        mem=flags.get("mem"),
        autobatch=flags.get("autobatch"),
        weight_decay=flags.get("weight-decay"),
        devices=flags.get("devices"),
        precision=env_dtype,
    )


def reset_random_seed(seed):
    """Re-seed dropout/noise sampling and the parameter initialisers."""
    set_seed(int(seed))


class DeviceInfo:
    def __init__(self, name, id, dtype):  # noqa: A002 (DyNet's argument name)
        self.name, self.id, self.type = name, id, dtype


def available_devices():
    return ["CPU"]


def get_device_info(name):
    if name != "CPU":
        raise ValueError("unknown device %r (this build has only CPU)" % (name,))
    return DeviceInfo("CPU", 0, -1)


class DynetParams:
    """DyNet's start-up parameters object (§3.3): set fields, then init()."""

    def __init__(self):
        self.random_seed = 0
        self.mem_descriptor = "512"
        self.weight_decay = 0.0
        self.autobatch = 0
        self.profiling = 0
        self.shared_parameters = False
        self.requested_gpus = -1

    def from_args(self, shared_parameters=None):
        flags = parse_flags(sys.argv)
        self.random_seed = int(flags.get("seed", self.random_seed))
        self.mem_descriptor = flags.get("mem", self.mem_descriptor)
        self.weight_decay = float(flags.get("weight-decay", self.weight_decay))
        self.autobatch = int(flags.get("autobatch", self.autobatch))
        self.profiling = int(flags.get("profiling", self.profiling))
        return self

    def from_config(self, conf):
        self.random_seed = int(conf.get("seed", 0))
        self.mem_descriptor = str(conf.get("mem", "512"))
        self.weight_decay = float(conf.get("weight_decay", 0))
        self.autobatch = int(conf.get("autobatch", 0))
        self.profiling = int(conf.get("profiling", 0))
        self.requested_gpus = int(conf.get("requested_gpus", 0) or 0)
        return self

    def set_mem(self, mem):
        self.mem_descriptor = str(mem)

    def set_random_seed(self, seed):
        self.random_seed = int(seed)

    def set_autobatch(self, autobatch):
        self.autobatch = int(autobatch)

    def set_profiling(self, profiling):
        self.profiling = int(profiling)

    def set_weight_decay(self, wd):
        self.weight_decay = float(wd)

    def set_shared_parameters(self, shared):
        self.shared_parameters = bool(shared)

    def set_requested_gpus(self, n):
        self.requested_gpus = int(n)

    def init(self):
        init(
            random_seed=self.random_seed,
            mem=self.mem_descriptor,
            autobatch=self.autobatch,
            weight_decay=self.weight_decay,
            devices="GPU" if self.requested_gpus > 0 else None,
        )


def init_from_params(params):
    """Initialise from a DynetParams object."""
    params.init()
