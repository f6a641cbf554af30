"""Ordinary calls a hostile probe once crashed dyn with, or got a wrong or unnamed answer from.

Each case runs in its own interpreter (a crash fails the test instead of killing the run) and
must end in a clear exception of the documented class, whose message names the operation, or
in the right value; then the same process trains a small model to show dyn is still usable.
"""

import os
import subprocess
import sys

import pytest

TRAIN = """
def _train():
    m = dy.ParameterCollection()
    W = m.add_parameters((2, 2), init=dy.ConstInitializer(0.1))
    E = m.add_lookup_parameters((5, 2), init=dy.ConstInitializer(0.1))
    t = dy.AdamTrainer(m, 0.05)
    for i in range(60):
        dy.renew_cg()
        x = E[i % 5] + dy.inputVector([1.0, 2.0])
        loss = dy.squared_norm(W * x - dy.inputVector([0.5, -1.0]))
        v = loss.value()
        loss.backward()
        t.update()
    return v
"""

# (name, code that raises or prints, expected exception class or None, text the message must hold)
CASES = [
    ("transpose_2g", "dy.transpose(dy.zeros((65536, 65537))).npvalue()", "ValueError", "2147483647"),
    ("sum_elems_2g", "dy.sum_elems(dy.ones((65536, 65537))).value()", "ValueError", "2147483647"),
    ("mean_elems_2g", "dy.mean_elems(dy.ones((65536, 65537))).value()", "ValueError", "2147483647"),
    ("pick_2g", "dy.pick(dy.zeros((65536, 65537)), 60000, dim=1)", "ValueError", "2147483647"),
    ("select_rows_2g", "dy.select_rows(dy.zeros((65536, 65537)), [65535])", "ValueError", "2147483647"),
    (
        "sum_batches_2g",
        "dy.sum_batches(dy.random_normal((65536,), batch_size=65537))",
        "ValueError",
        "random_normal",
    ),
    ("random_normal_1e12", "dy.random_normal((10**6, 10**6)).npvalue()", "ValueError", "random_normal"),
    ("rectify_nan", "print(dy.rectify(dy.inputVector([float('nan')])).npvalue())", None, "[nan]"),
    (
        "argmax_nan",
        "print(dy.argmax(dy.inputVector([1.0, float('nan')]), 'zero_gradient').npvalue())",
        None,
        "[0. 1.]",
    ),
    ("add_parameters_float", "dy.ParameterCollection().add_parameters((2.9, 3))", "TypeError", "2.9"),
    ("inputTensor_complex", "dy.inputTensor([1 + 2j, 3])", "TypeError", "inputTensor"),
    ("inputTensor_none", "dy.inputTensor([None, 1.0])", "TypeError", "inputTensor"),
    ("pick_range_none", "dy.pick_range(None, 0, 1)", "TypeError", "pick_range"),
    ("pickrange_str", "dy.pickrange('x', 0, 1)", "TypeError", "pickrange"),
    (
        "strided_select_array",
        "import numpy as np; dy.strided_select(np.zeros(3), [1], [0], [2])",
        "TypeError",
        "strided_select",
    ),
    ("select_cols_none", "dy.select_cols(None, [0])", "TypeError", "select_cols"),
    (
        "lookup_2_64",
        "m = dy.ParameterCollection(); E = m.add_lookup_parameters((4, 2)); dy.lookup(E, 2**64 + 1)",
        "IndexError",
        "lookup",
    ),
    ("init_mem_negative", "dy.init(mem='-5')", "ValueError", "mem"),
    (
        "stale_value",
        "x = dy.inputVector([1.0]); dy.renew_cg(); x.value()",
        "StaleExpressionError",
        "renew_cg",
    ),
    (
        "stale_argument",
        "x = dy.inputVector([1.0]); dy.renew_cg(); dy.tanh(x)",
        "StaleExpressionError",
        "stale",
    ),
]


def _program(code):
    body = "\n".join("    " + line for line in code.splitlines())
    handler = "except Exception as e:\n    print('RAISED', type(e).__name__, '|', e)\n"
    return "import dyn as dy\n%s\ntry:\n%s\n%sprint('TRAINED', _train() < 0.05)\n" % (TRAIN, body, handler)


@pytest.mark.parametrize("name, code, cls, text", CASES, ids=[c[0] for c in CASES])
def test_hostile_call_then_training(name, code, cls, text):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    r = subprocess.run(
        [sys.executable, "-c", _program(code)], capture_output=True, text=True, timeout=120, env=env
    )
    assert r.returncode == 0, "rc %d (a signal is negative)\n%s\n%s" % (r.returncode, r.stdout, r.stderr)
    out = r.stdout
    if cls is None:
        assert "RAISED" not in out, out
    else:
        assert "RAISED %s |" % cls in out, out
    assert text in out, out
    assert "TRAINED True" in out, out


def test_out_of_memory_then_training():
    """A genuine out-of-memory (under an address-space limit), then a new graph and training."""
    code = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_AS, (700 << 20, 700 << 20))\n"
        "dy.random_normal((20000, 20000)).npvalue()\n"
    )
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    prog = _program(code)
    r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "RAISED MemoryError | dyn: cannot allocate" in r.stdout
    assert "TRAINED True" in r.stdout
