import os

# Single-threaded BLAS: tests are small, and threads only add noise.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")


def _cuda_gpu_present():
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


# Where there is no CUDA GPU, GPU:0 is the GPU device's numpy stand-in: the GPU code paths (its
# kernels, memory, the autobatching engine's device calls) run in every test of the device axis.
# DYN_GPU_STANDIN=0 turns that off (GPU tests then skip, saying why).
if "DYN_GPU_STANDIN" not in os.environ:
    os.environ["DYN_GPU_STANDIN"] = "0" if _cuda_gpu_present() else "1"

import pytest  # noqa: E402

import dyn as dy  # noqa: E402
from dyn._core.core import device as _device  # noqa: E402
from dyn._core.core import graph as _graph  # noqa: E402


@pytest.fixture
def float64():
    """Run a test with float64 graphs and parameters."""
    dy.set_precision("float64")
    try:
        yield
    finally:
        dy.set_precision("float32")


@pytest.fixture(autouse=True)
def fresh_graph():
    dy.renew_cg()
    yield


# The device axis: the generated op tests, builders, trainers and the autobatching engine run on
# every device this process has (tests/<dir>/conftest.py opts a directory in): the CPU, and GPU:0
# where cupy finds a CUDA GPU or DYN_GPU_STANDIN=1 puts the GPU device's numpy stand-in there (CI).
def _gpu_or_reason():
    try:
        _device.load("GPU:0")
        return None
    except (RuntimeError, ValueError) as e:
        return str(e)


GPU_SKIP_REASON = _gpu_or_reason()
DEVICES = _device.available()


@pytest.fixture(params=DEVICES)
def device(request):
    """Run a test with graphs on each available device, back on the CPU afterwards."""
    _graph.use_device(request.param)
    try:
        yield request.param
    finally:
        _graph.use_device("CPU")
