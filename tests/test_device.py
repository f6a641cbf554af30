"""The device seam: which devices there are, moving graphs between them, and what a device does
for the core (arena memory, zeroing, gathers and scatter-adds, reading values back)."""

import numpy as np
import pytest

import dyn as dy
from dyn._core.core import device as _device
from dyn._core.core import graph as _graph
from dyn.graph import autobatch_stats


def test_the_cpu_is_a_device_and_unknown_names_are_refused():
    assert "CPU" in _device.available()
    assert _graph.device_name() == "CPU"
    _graph.use_device("cpu")  # names are case-insensitive; the current device: nothing changes
    assert _graph.device_name() == "CPU"
    for bad in ("TPU", ""):
        with pytest.raises(ValueError, match="no device %r here \\(available: CPU" % bad):
            _graph.use_device(bad)
    with pytest.raises(ValueError, match="by its index"):
        _graph.use_device("GPU")
    assert dy.inputVector([1.0, 2.0]).npvalue().tolist() == [1.0, 2.0]


def test_values_and_gradients_cross_the_device_boundary():
    """Forward, backward with autobatched gathers and scatter-adds, and values read back, all
    through the device, equal the plain engine's."""
    rs = np.random.RandomState(3)
    m = dy.ParameterCollection()
    W = m.parameters_from_numpy(rs.uniform(-1, 1, (5, 4)))
    E = m.lookup_parameters_from_numpy(rs.uniform(-1, 1, (7, 4)))

    def run(autobatching):
        dy.renew_cg(autobatching=autobatching)
        hs = [dy.tanh(W * E[i]) for i in (1, 3, 3, 6)]
        loss = dy.sum_elems(dy.esum(hs))
        value = loss.value()
        W.write_grads(0)
        E.write_grads(0)
        loss.backward()
        return value, W.grad_as_array().copy(), E.grad_as_array().copy()

    plain = run(False)
    autobatch_stats(reset=True)
    batched = run(True)
    assert autobatch_stats()["batches"] > 0
    for a, b in zip(plain, batched):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert np.count_nonzero(batched[2][3]) == 4  # row 3, used twice, got both gradients


def test_check_validity_scans_values_through_the_device():
    dy.renew_cg(check_validity=True)
    x = dy.inputVector([1.0, -1.0])
    with pytest.raises(RuntimeError, match=r"NaN or Inf detected: first in node \d+ \(log"):
        dy.log(x).value()


def test_the_parameter_pool_is_made_by_its_device():
    """The pool's arrays come from the device's zeros (and grow through it); host code reads them
    through host_values/host_grads, which on the CPU are the pool's own arrays."""
    from dyn._core.core.expr import Pool

    made = []

    def counting_zeros(n, dtype):
        made.append(n)
        return np.zeros(n, dtype)

    _device.register_arrays("CPU", counting_zeros, lambda a: a, lambda a: a, np.add.at)
    try:
        pool = Pool(0, "CPU")
        assert made == [1024, 1024]
        pool.alloc(3000)  # grows: two new arrays from the device
        assert made[2:] == [4096, 4096] and pool.values.dtype == np.float32
    finally:
        _device.register_arrays("CPU", np.zeros, lambda a: a, lambda a: a, np.add.at)
    assert pool.host_values() is pool.values and pool.host_grads() is pool.grads
    m = dy.ParameterCollection()
    W = m.add_parameters((2, 3))
    W.set_value(np.arange(6.0).reshape(2, 3))
    assert np.shares_memory(W.value_view(), W.value_view())  # a view of the pool, not a copy
    np.testing.assert_array_equal(W.as_array(), np.arange(6.0).reshape(2, 3))
