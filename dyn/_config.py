"""Start-up configuration: DyNet's command-line flags and dyn.init().

DyNet reads ``--dynet-*`` flags from ``sys.argv`` at import without removing
them (scripts that use argparse declare them themselves); dyn does the same.
"""

from __future__ import annotations

import operator
import os
import sys

from dyn._core.core import graph as _graph

_FLAGS = ("mem", "seed", "autobatch", "weight-decay", "gpus", "gpu", "devices", "profiling", "viz")
state = {"initialized": False, "autobatch": True, "weight_decay": 0.0, "seed": None}


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


_MAX_MEM_MB = 1 << 26  # 64 TiB: more is a typo, not a machine


def _mem_bytes(spec) -> int:
    """DyNet's --dynet-mem, checked: megabytes, one number ("512") or one per
    pool ("fwd,bwd,param" or "fwd,bwd,param,scratch"); dyn's arenas start at
    the largest. Raises ValueError naming the option and the value."""

    def bad(why):
        return ValueError("dyn.init: mem must be %s, got %r" % (why, spec))

    if isinstance(spec, bool):
        raise bad("megabytes (e.g. 512 or '512,256,256'), not a bool")
    if isinstance(spec, str):
        parts = [p.strip() for p in spec.split(",")]
        if len(parts) not in (1, 3, 4):
            raise bad("megabytes: one size or three or four (fwd,bwd,param[,scratch])")
        values = []
        for p in parts:
            if p.lstrip("+-").isdigit() and p.isascii() and len(p) <= 30:
                values.append(int(p))
            else:
                raise bad("megabytes: whole numbers like '512' or '512,256,256' (%r is not)" % p)
    else:
        try:
            values = [operator.index(spec)]
        except TypeError:
            raise bad("megabytes: an int or a string like '512' or '512,256,256'") from None
    for v in values:
        if v <= 0:
            raise bad("megabytes, each size positive")
        if v > _MAX_MEM_MB:
            raise bad("megabytes, at most %d (asked for %d)" % (_MAX_MEM_MB, v))
    return max(values) * (1 << 20)


def _number(what, value, kind):
    if isinstance(value, bool) and kind is not bool:
        raise ValueError("dyn.init: %s must be %s, got %r" % (what, kind.__name__, value))
    try:
        if kind is int and isinstance(value, float):
            if not value.is_integer():
                raise ValueError
            return int(value)
        return kind(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError("dyn.init: %s must be %s, got %r" % (what, kind.__name__, value)) from None


def _seed(what, value):
    s = _number(what, value, int)
    if not 0 <= s < 1 << 32:
        raise ValueError("dyn.init: %s must be in [0, 2**32), got %r" % (what, value))
    return s


def _flag(what, value):
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "on", "off"):
        return value.strip().lower() in ("true", "on")
    if isinstance(value, bool):
        return value
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
    device=None,
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

    Every option is checked before any is applied: a bad one raises
    ValueError naming the option and the value, and a call that fails for any
    reason (a MemoryError allocating the arenas too) changes nothing: the
    previous settings stay in force.

    Example:
        dyn.init(random_seed=1, autobatch=True)
        dyn.current_config()   # {'seed': 1, 'autobatch': True, ...}

    Args:
        shared_parameters: accepted for DyNet compatibility (multi-process
            parameter sharing is not implemented).
        random_seed: seed of dropout/noise sampling and default initialisers.
        mem: initial arena size in MB (DyNet's --dynet-mem: "512", or one
            size per pool, "fwd,bwd,param[,scratch]", of which dyn uses the
            largest); arenas grow anyway.
        autobatch: run new graphs through the automatic batching engine
            (DyNet's --dynet-autobatch); renew_cg(autobatching=...) overrides it.
        weight_decay: accepted for compatibility (applied by trainers later).
        precision: "float32" (default) or "float64" for new graphs/parameters.
        devices / device: DyNet's --dynet-devices: "CPU", "GPU:0" or a list
            such as "CPU,GPU:0". Graphs run on the first GPU listed (else the
            CPU), and new parameters live there; the current graph is renewed.
            A GPU needs cupy and a CUDA GPU: a RuntimeError says what is
            missing.
    """
    # check every option before applying any: a bad one changes nothing
    seed_value = None if seed is None else _seed("seed", seed)
    if random_seed is not None:
        rs = _seed("random_seed", random_seed)
        if seed_value is not None and rs != seed_value:
            raise ValueError("dyn.init: seed=%r and random_seed=%r disagree (give one)" % (seed, random_seed))
        seed_value = rs
    if device is not None:
        if devices is not None and str(devices) != str(device):
            raise ValueError("dyn.init: devices=%r and device=%r disagree (give one)" % (devices, device))
        devices = device
    main_device = None if devices is None else _devices(devices)
    mem_bytes = None if mem is None or (isinstance(mem, str) and not mem.strip()) else _mem_bytes(mem)
    ab = None if autobatch is None else _flag("autobatch", autobatch)
    wd = None if weight_decay is None else _number("weight_decay", weight_decay, float)
    if wd is not None and not 0.0 <= wd < 1.0:
        raise ValueError("dyn.init: weight_decay must be in [0, 1), got %r" % (weight_decay,))
    if precision is not None and precision not in ("float32", "float64"):
        raise ValueError("dyn.init: precision must be 'float32' or 'float64', got %r" % (precision,))
    if ab:
        from dyn._core.core import autobatch as _autobatch  # noqa: F401 (the engine registers itself)

    # apply: what can fail (allocating the arenas) first; it changes nothing when it
    # fails, and the rest cannot fail. Anything that still raises is rolled back.
    saved = dict(state), _graph.get_dtype(), _graph.autobatching(), _graph.device_name()
    try:
        if main_device is not None and main_device != _graph.device_name():
            _graph.use_device(main_device)
        if mem_bytes is not None:
            _graph.set_initial_memory(mem_bytes)
            state["mem"] = mem_bytes
        if precision is not None and precision != _graph.get_dtype():
            _graph.set_dtype(precision)
        if ab is not None:
            _graph.set_autobatching(ab)  # the current graph too
            state["autobatch"] = ab
        if wd is not None:
            state["weight_decay"] = wd
        if seed_value:  # DyNet: 0 means "no fixed seed"
            set_seed(seed_value)
    except BaseException:
        _restore(*saved)
        raise
    state["initialized"] = True


def _restore(old_state, dtype, autobatching, device="CPU"):
    """Put back the settings init saw before it started. The arenas stay as
    they are (set_initial_memory either completed or changed nothing, and it
    runs first, before anything that could fail), and so does "mem"."""
    old_state = dict(old_state, mem=state.get("mem"))
    if _graph.device_name() != device:
        _graph.use_device(device)
    if _graph.get_dtype() != dtype:
        _graph.set_dtype(dtype)
    if _graph.autobatching() != autobatching:
        _graph.set_autobatching(autobatching)
    if state.get("seed") != old_state.get("seed") and old_state.get("seed") is not None:
        set_seed(old_state["seed"])
    state.clear()
    state.update(old_state)


def current_config() -> dict:
    """What dyn.init set: seed (None: not fixed), autobatch, weight_decay,
    precision, mem (initial arena bytes, None: the default)."""
    return {
        "seed": state["seed"],
        "autobatch": state["autobatch"],
        "weight_decay": state["weight_decay"],
        "precision": _graph.get_dtype(),
        "mem": state.get("mem"),
        "device": _graph.device_name(),
    }


_SEED_HOOKS = []  # called with every new seed, after the graph's sampling is seeded


def on_seed(hook):
    """Call hook(seed) whenever the seed is set (dyn.params seeds its
    initialisers this way: this module imports nothing of dyn.params)."""
    _SEED_HOOKS.append(hook)
    return hook


def set_seed(seed: int):
    state["seed"] = seed
    _graph.seed(seed)
    for hook in _SEED_HOOKS:
        hook(seed)


def _devices(spec):
    """The device graphs run on for DyNet's --dynet-devices value ("CPU", "GPU:0", "CPU,GPU:0"):
    the first GPU listed, else the CPU. Each name is checked, and a GPU made available (a
    RuntimeError says what is missing); ValueError for a name that is no device."""
    from dyn._core.core import device as _device
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError("dyn.init: devices must be a string such as 'CPU', 'GPU:0' or 'CPU,GPU:0', got %r"
                         % (spec,))
    names = [d.strip().upper() for d in spec.split(",")]
    main = "CPU"
    for d in names:
        if d == "CPU" or (d.startswith("CPU:") and d[4:].isdigit()):
            continue
        if not (d.startswith("GPU:") and d[4:].isdigit()):
            raise ValueError("dyn.init: devices=%r: %r is not a device name ('CPU', 'GPU:0')" % (spec, d))
        if d != "GPU:0":
            raise ValueError("dyn.init: devices=%r: this process uses one GPU, 'GPU:0' (run one process "
                             "per GPU with CUDA_VISIBLE_DEVICES to use several)" % (spec,))
        _device.load(d)
        if main == "CPU":
            main = d
    return main


def device_arg(device, what):
    """A device name given to add_parameters(device=...) or to_device: "" / None is the device graphs
    run on; otherwise the name checked and its device made available."""
    if device is None or device == "":
        return None
    if not isinstance(device, str):
        raise TypeError("%s: device must be a name such as 'CPU' or 'GPU:0', got %r" % (what, device))
    name = device.strip().upper()
    if name.startswith("CPU"):
        return "CPU"
    _devices(name)
    return name


def _gpu_flag(flags):
    """--dynet-gpus N / --dynet-gpu N: the number of GPUs asked for (0: none)."""
    v = flags.get("gpus", flags.get("gpu"))
    if v is None:
        return 0
    try:
        n = int(v)
    except ValueError:
        raise ValueError("--dynet-gpus needs a number of GPUs, got %r" % (v,)) from None
    if n > 1:
        raise RuntimeError("dyn: --dynet-gpus %d: this process uses one GPU (run one process per GPU)" % n)
    return n


def default_autobatch():
    """Automatic batching is on unless turned off: ``--dynet-autobatch 0``, ``dyn.init(autobatch=False)``,
    ``renew_cg(autobatching=False)``, or the environment variable ``DYN_AUTOBATCH=0`` (read at
    import; the test suite runs once with each setting)."""
    v = os.environ.get("DYN_AUTOBATCH", "").strip()
    if not v:
        return True
    try:
        return _flag("autobatch", v)
    except ValueError:
        raise ValueError("DYN_AUTOBATCH must be 0 or 1 (or true/false, on/off), got %r" % v) from None


def init_from_argv():
    flags = parse_flags(sys.argv)
    devices = flags.get("devices")
    if _gpu_flag(flags) and devices is None:
        devices = "GPU:0"
    if devices is None and os.environ.get("DYN_DEVICE"):
        devices = os.environ["DYN_DEVICE"]
    env_dtype = os.environ.get("DYN_PRECISION")
    init(
        random_seed=flags.get("seed"),
        mem=flags.get("mem"),
        autobatch=flags.get("autobatch", default_autobatch()),
        weight_decay=flags.get("weight-decay"),
        devices=devices,
        precision=env_dtype,
    )


def reset_random_seed(seed):
    """Re-seed dropout/noise sampling and the parameter initialisers."""
    set_seed(int(seed))


class DeviceInfo:
    """DyNet's device record: name, id, type (-1 CPU, 1 GPU); on a GPU also the card's name and its
    memory in bytes (memory_free, memory_total; memory_used: what dyn's pool holds)."""

    def __init__(self, name, id, dtype):  # noqa: A002 (DyNet's argument name)
        self.name, self.id, self.type = name, id, dtype

    def __repr__(self):
        return "DeviceInfo(%s)" % ", ".join("%s=%r" % kv for kv in sorted(self.__dict__.items()))


def available_devices():
    """The devices this process has made available: the CPU, and GPU:0 once a GPU was asked for."""
    from dyn._core.core import device as _device
    return sorted(_device.available(), key=lambda d: (d != "CPU", d))


def get_device_info(name):
    if not isinstance(name, str) or name.strip().upper() not in available_devices():
        raise ValueError("unknown device %r (available: %s)" % (name, ", ".join(available_devices())))
    name = name.strip().upper()
    if name == "CPU":
        return DeviceInfo("CPU", 0, -1)
    from dyn._core.gpu.device import current_backend
    info = current_backend().info()
    d = DeviceInfo(name, int(name[4:]), 1)
    d.card = info.pop("name")
    d.__dict__.update(info)
    return d


class DynetParams:
    """DyNet's start-up parameters object (DynetParams): set fields, then init()."""

    def __init__(self):
        self.random_seed = 0
        self.mem_descriptor = "512"
        self.weight_decay = 0.0
        self.autobatch = int(state["autobatch"])  # dyn's default (on), where DyNet's was 0
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
        self.autobatch = int(conf.get("autobatch", int(state["autobatch"])))
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
            devices="GPU:0" if self.requested_gpus > 0 else None,
        )


def init_from_params(params):
    """Initialise from a DynetParams object."""
    params.init()
