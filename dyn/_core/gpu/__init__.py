"""The GPU device (dyn/_core/gpu/device.pyx over a backend of dyn/_core/gpu/backend.py) and its
kernels (dyn/_core/gpu/kernels/). Nothing here is imported until a GPU is asked for, so a CPU
install never imports cupy."""
import os

_BACKEND = None


def standin_requested():
    return os.environ.get("DYN_GPU_STANDIN", "").lower() in ("1", "true", "yes", "on")


def load(standin=False):
    """Register device "GPU:0" and its kernels, once: cupy's first CUDA GPU, or the numpy stand-in
    with standin=True or where the environment sets DYN_GPU_STANDIN=1. A RuntimeError says what is
    missing."""
    global _BACKEND
    if _BACKEND is not None:
        return _BACKEND
    from dyn._core.gpu import backend as _bk
    if standin or standin_requested():
        bk = _bk.StandIn()
    else:
        try:
            import cupy  # noqa: F401
        except ImportError:
            raise RuntimeError(
                "dyn: a GPU needs cupy, which is not installed: pip install 'dyn[gpu]' installs "
                "cupy-cuda12x (or install the cupy wheel for your CUDA, e.g. cupy-cuda13x)") from None
        try:
            bk = _bk.CupyBackend(0)
        except Exception as e:
            raise RuntimeError("dyn: cupy is installed but finds no usable CUDA GPU (%s: %s)"
                               % (type(e).__name__, e)) from None
    from dyn._core.core import graph as _graph
    bk.seed(_graph.last_seed())          # the seed dropout on the CPU uses (dyn.init's)
    import dyn._core.gpu.device as _device
    _device.install(bk, "GPU:0")
    import dyn._core.gpu.optim  # noqa: F401  (registers the optimizer loops)
    from dyn._core.gpu import kernels  # noqa: F401  (registers the kernels)
    _BACKEND = bk
    return bk


def current():
    """The loaded backend, or None."""
    return _BACKEND
