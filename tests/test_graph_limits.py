"""Sizes the core cannot hold are refused at creation, and memory failures leave dyn usable.

A tensor holds at most 2**31 - 1 elements, batch included (kernels count in C ints): a larger
shape, batch or shape-rule result is a ValueError naming the operation, raised where the
expression is made, never a crash or a wrong number. Running out of memory in forward, backward
or dyn.init raises MemoryError and changes nothing that the next graph needs. The out-of-memory
cases run in a subprocess under an address-space limit, so a crash fails the test instead of
killing the run.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dyn as dy
from dyn._core.core import autobatch as _autobatch
from dyn._core.core import graph as _graph
from dyn.graph import autobatch_stats

BIG = (65536, 65537)  # 2**32 + 2**16 elements: wraps to 65536 in a 32-bit count


@pytest.fixture(autouse=True)
def _fresh_graph():
    dy.renew_cg()
    yield
    dy.renew_cg()


@pytest.mark.parametrize(
    "make, op",
    [
        (lambda: dy.zeros(BIG), ""),
        (lambda: dy.ones(BIG), ""),
        (lambda: dy.random_normal((10**6, 10**6)), "random_normal"),
        (lambda: dy.random_normal((65536,), batch_size=65537), "random_normal"),
        (lambda: dy.random_uniform((10,), 0, 1, batch_size=2**64), "random_uniform"),
        (lambda: dy.zeros((65536, 1)) * dy.zeros((1, 65537)), "matmul"),
        (lambda: dy.concatenate([dy.zeros((2**30 + 5,)), dy.zeros((2**30 + 5,))]), "concatenate"),
        (lambda: dy.zeros((65536, 1)) * dy.zeros((1, 2), batch_size=40000), "matmul"),
        # the output fits, its im2col scratch (3 x 3 x 64 per output element) does not
        (lambda: dy.conv2d(dy.zeros((2000, 2000, 64)), dy.zeros((3, 3, 64, 1)), [1, 1]), "conv2d"),
    ],
)
def test_too_many_elements_is_refused_at_creation(make, op):
    n = _graph.num_nodes()
    with pytest.raises(ValueError, match="2147483647") as info:
        make()
    assert op in str(info.value)
    # the graph is as it was before the failing call's node (its arguments may stay)
    x = dy.inputVector([1.0, 2.0])
    assert _graph.num_nodes() <= n + 4
    assert list(x.npvalue()) == [1.0, 2.0]


def test_largest_allowed_count_is_accepted_lazily():
    # 2**31 - 1 elements: accepted (no memory is used until a value is asked for)
    x = dy.zeros((2**31 - 1,))
    assert x.dim() == ((2**31 - 1,), 1)
    y = dy.zeros((46340, 46340))  # just under 2**31
    assert y.dim() == ((46340, 46340), 1)


def test_huge_lookup_index_is_an_index_error():
    m = dy.ParameterCollection()
    E = m.add_lookup_parameters((10, 3))
    for bad in (2**64 + 1, 2**31, -1, -(2**70)):
        with pytest.raises(IndexError, match=r"lookup: \w+ %d is out of range" % bad):
            dy.lookup(E, bad)
        with pytest.raises(IndexError, match="out of range"):
            E[bad]
        with pytest.raises(IndexError, match="out of range"):
            dy.lookup_batch(E, [1, bad])
    with pytest.raises(TypeError, match="lookup: index must be an integer"):
        dy.lookup(E, 1.5)
    assert E[9].npvalue().shape == (3,)


def test_large_batches_are_split_and_equal_the_unbatched_engine():
    """The engine splits a batch whose output or arguments would pass the element limit; here
    the limit is lowered so that 12 sequences of 8-vectors run in parts of at most 3."""
    rs = np.random.RandomState(0)
    m = dy.ParameterCollection()
    W = m.parameters_from_numpy(rs.uniform(-1, 1, (8, 8)))
    data = rs.uniform(-1, 1, (12, 8))

    def run(autobatching):
        dy.renew_cg(autobatching=autobatching)
        ys = [dy.tanh(W * dy.inputVector(list(v))) for v in data]
        loss = dy.esum([dy.sum_elems(y) for y in ys])
        value = loss.value()
        W.write_grads(0)
        loss.backward()
        return value, W.grad_as_array().copy(), [y.npvalue() for y in ys]

    plain = run(False)
    _autobatch._set_part_limit(8 * 3)
    try:
        autobatch_stats(reset=True)
        split = run(True)
        stats = autobatch_stats()
    finally:
        _autobatch._set_part_limit(0)
    # tanh and sum_elems (8 + 8 elements a member) run in 4 parts of 3; the products read the
    # 64-element W per member, so each runs alone
    assert stats["batches"] == 8 and stats["batched_nodes"] == 24
    np.testing.assert_allclose(split[0], plain[0], rtol=1e-5)
    np.testing.assert_allclose(split[1], plain[1], rtol=1e-5, atol=1e-6)
    for a, b in zip(split[2], plain[2]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _run_limited(code, limit_mb=700):
    """Run code in a fresh interpreter under RLIMIT_AS; return its stdout (a signal fails)."""
    prog = "import resource\nresource.setrlimit(resource.RLIMIT_AS, (%d << 20, %d << 20))\n" % (
        limit_mb,
        limit_mb,
    )
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    # numpy and dyn are imported before the limit, so only dyn's allocations meet it
    full = "import numpy, dyn\n" + prog + textwrap.dedent(code)
    r = subprocess.run([sys.executable, "-c", full], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, "rc %d\nstdout:\n%s\nstderr:\n%s" % (r.returncode, r.stdout, r.stderr)
    return r.stdout


TRAIN = """
def train():
    m = dy.ParameterCollection()
    W = m.add_parameters((2, 2))
    t = dy.SimpleSGDTrainer(m, 0.1)
    for i in range(50):
        dy.renew_cg()
        x = dy.inputVector([1.0, 2.0])
        loss = dy.squared_norm(W * x - dy.inputVector([0.5, -1.0]))
        v = loss.value()
        loss.backward()
        t.update()
    return v
"""


@pytest.mark.parametrize("autobatching", [False, True])
def test_out_of_memory_in_forward_then_the_next_graph_trains(autobatching):
    out = _run_limited(
        "import dyn as dy\n"
        + TRAIN
        + """
dy.renew_cg(autobatching=%r)
small = dy.inputVector([1.0, 2.0])
big = dy.random_normal((20000, 20000))        # 1.6 GB of float32
try:
    big.npvalue()
except MemoryError as e:
    print("forward:", e)
print("small still:", small.npvalue().tolist())
dy.renew_cg(autobatching=%r)
print("next graph:", dy.inputVector([1.0, 2.0]).npvalue().tolist())
print("trained:", train() < 1e-3)
"""
        % (autobatching, autobatching)
    )
    assert "forward: dyn: cannot allocate" in out
    assert "small still: [1.0, 2.0]" in out
    assert "next graph: [1.0, 2.0]" in out
    assert "trained: True" in out


def test_out_of_memory_in_backward_then_the_next_graph_trains():
    out = _run_limited(
        "import dyn as dy\n"
        + TRAIN
        + """
m = dy.ParameterCollection()
b = m.add_parameters(8000)
dy.renew_cg()
# 256 MB a node: forward (x in a 320 MB block, x + b in a 640 MB one) fits, the gradient does not
x = dy.random_normal((8000, 8000))
loss = dy.sum_elems(dy.colwise_add(x, dy.parameter(b)))
print("forward ok:", loss.value() is not None)
try:
    loss.backward()
except MemoryError as e:
    print("backward:", e)
dy.renew_cg()
print("trained:", train() < 1e-3)
""",
        limit_mb=1300,
    )
    assert "forward ok: True" in out
    assert "backward: dyn: cannot allocate" in out
    assert "trained: True" in out


def test_failed_arena_resize_changes_nothing():
    out = _run_limited(
        "import dyn as dy\n"
        + TRAIN
        + """
from dyn._core.core import graph as _graph
before = _graph.memory_stats()
for size in (2 << 30, 1 << 60):
    try:
        _graph.set_initial_memory(size)
    except MemoryError as e:
        print("resize:", e)
after = _graph.memory_stats()
print("capacity kept:", before["forward_capacity"] == after["forward_capacity"]
      and before["backward_capacity"] == after["backward_capacity"])
print("value:", dy.inputVector([3.0]).value())
print("trained:", train() < 1e-3)
"""
    )
    assert out.count("resize: dyn: cannot allocate") == 2
    assert "capacity kept: True" in out
    assert "value: 3.0" in out
    assert "trained: True" in out


def test_set_initial_memory_checks_its_argument():
    with pytest.raises(ValueError, match="must not be negative"):
        _graph.set_initial_memory(-5)
    with pytest.raises(TypeError, match="must be an integer"):
        _graph.set_initial_memory("5")
    assert dy.inputVector([1.0]).value() == 1.0


def test_a_stale_expression_is_one_class_as_argument_and_evaluated():
    x = dy.inputVector([1.0])
    dy.renew_cg()
    for use in (lambda: x.value(), lambda: x.npvalue(), lambda: dy.tanh(x), lambda: x + 1.0):
        with pytest.raises(dy.StaleExpressionError, match="renew_cg\\(\\) was called since"):
            use()
    assert issubclass(dy.StaleExpressionError, ValueError)
    assert issubclass(dy.StaleExpressionError, RuntimeError)
