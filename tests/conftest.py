import os

# Single-threaded BLAS: tests are small, and threads only add noise.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402

import dyn as dy  # noqa: E402
from dyn._core.core import device as _device  # noqa: E402
from dyn._core.core import graph as _graph


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
