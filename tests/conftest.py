import os

# Single-threaded BLAS: tests are small, and threads only add noise.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402

import dyn as dy  # noqa: E402


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
