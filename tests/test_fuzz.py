"""Never crash, never lie: fuzzing every registered operation in subprocesses.

tests/_fuzz_driver.py draws cases over the operation registry (shapes, batch
sizes, precisions, NaN/inf/huge values, indices out of range and negative,
wrong types, huge sizes) and checks each ends in a value (right shape, equal
to the numpy reference for clean inputs) or a documented Python exception,
forward and backward. It runs in worker subprocesses so that a crash (a
signal) fails this test instead of killing the test run: the driver writes
the case it is about to run to a progress file, so the failure names the
exact case and the command that replays it; the worker then restarts after
that case, so one run reports every crash, not only the first.

DYN_FUZZ_CASES and DYN_FUZZ_SEED change the size and seed (for exploring).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKERS = 2
CASES = int(os.environ.get("DYN_FUZZ_CASES", "3000"))
SEED = int(os.environ.get("DYN_FUZZ_SEED", "20240611"))


def _env(device=None):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONFAULTHANDLER="1")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if device is not None:
        env["DYN_DEVICE"] = device       # the driver's graphs and parameters on that device
    return env


def _worker(seed, first, count, stride, tmp, timeout, device=None):
    """Run cases first, first+stride, ... (count of them) in subprocesses,
    restarting after each crash. Returns (cases run, crashes, violations)."""
    crashes, violations, ran = [], [], 0
    report = tmp / ("report-%d.jsonl" % first)
    progress = tmp / ("progress-%d.txt" % first)
    start, left = first, count
    while left > 0:
        cmd = [sys.executable, "-m", "tests._fuzz_driver", "--seed", str(seed), "--start", str(start)]
        cmd += [
            "--count",
            str(left),
            "--stride",
            str(stride),
            "--progress",
            str(progress),
            "--report",
            str(report),
        ]
        try:
            p = subprocess.run(cmd, cwd=ROOT, env=_env(device), capture_output=True, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            crashes.append("timed out after %ds in: %s" % (timeout, progress.read_text().strip()))
            break
        summary = [line for line in p.stdout.splitlines() if line.startswith("SUMMARY ")]
        if p.returncode in (0, 1) and summary:
            ran += json.loads(summary[-1][len("SUMMARY ") :])["cases"]
            break
        # died (a signal, or an error outside the cases): name the case it was in
        where = progress.read_text().strip() if progress.exists() else ""
        idx = int(where.split(" ", 1)[0]) if where[:1].isdigit() else None
        crashes.append(
            "exit status %d in case %s\n  replay: python -m tests._fuzz_driver --seed %d --only %s -v\n%s"
            % (p.returncode, where, seed, idx, textwrap.indent(p.stderr[-3000:], "    "))
        )
        if idx is None or len(crashes) > 20:
            break
        done = (idx - start) // stride + 1
        ran += done
        start, left = idx + stride, left - done
    if report.exists():
        violations = [json.loads(line) for line in report.read_text().splitlines() if line.strip()]
    return ran, crashes, violations


def _fuzz(tmp_path, seed, cases, timeout, device=None):
    per = -(-cases // WORKERS)
    with ThreadPoolExecutor(WORKERS) as ex:
        results = list(
            ex.map(lambda w: _worker(seed, w, per, WORKERS, tmp_path, timeout, device), range(WORKERS))
        )
    ran = sum(r[0] for r in results)
    crashes = [c for r in results for c in r[1]]
    violations = [v for r in results for v in r[2]]
    msg = []
    for c in crashes:
        msg.append("CRASH " + c)
    for v in violations:
        msg.append(
            "case %d: %s\n  %s\n  replay: python -m tests._fuzz_driver --seed %d --only %d -v"
            % (v["case"], v["desc"], v["error"].replace("\n", "\n  "), v["seed"], v["case"])
        )
    assert not msg, "%d crashes, %d contract violations in %d cases:\n%s" % (
        len(crashes),
        len(violations),
        ran,
        "\n".join(msg),
    )
    assert ran >= cases, "ran %d of %d cases" % (ran, cases)


def test_registry_fuzz(tmp_path):
    """3,000 cases (two workers), fixed seed: no crash, every error documented."""
    _fuzz(tmp_path, SEED, CASES, timeout=240)


@pytest.mark.slow
def test_registry_fuzz_more(tmp_path):
    """A second fixed seed, 6,000 more cases."""
    _fuzz(tmp_path, SEED + 1, 2 * CASES, timeout=300)


def test_registry_fuzz_on_the_gpu_device(tmp_path):
    """The same 3,000 cases with graphs on GPU:0 (a CUDA GPU, or the GPU device's stand-in)."""
    from tests.conftest import GPU_SKIP_REASON

    if GPU_SKIP_REASON is not None:
        pytest.skip("no GPU device: %s" % GPU_SKIP_REASON)
    _fuzz(tmp_path, SEED, CASES, timeout=300, device="GPU:0")


def test_driver_replays_a_case_and_names_it():
    """--only runs one case, the same one the full run drew, and reports it."""
    cmd = [sys.executable, "-m", "tests._fuzz_driver", "--seed", "5", "--only", "17", "-v"]
    p = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout.split("SUMMARY ", 1)[1])
    assert summary["cases"] == 1 and summary["violations"] == 0
    assert p.stderr.startswith("17 ") and "->" in p.stderr

    from dyn.ops._registry import REGISTRY
    from tests._fuzz_driver import Case

    ops = sorted(REGISTRY)
    assert Case(5, 17, ops).describe() == Case(5, 17, ops).describe()
    assert p.stderr.split("\n", 1)[0] == "17 " + Case(5, 17, ops).describe()


def test_a_crash_is_reported_with_its_case(tmp_path, monkeypatch):
    """The harness itself: a worker killed by a signal fails with the case it was in."""
    fake = tmp_path / "tests"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "_fuzz_driver.py").write_text(
        textwrap.dedent(
            """
            import os, signal, sys
            args = sys.argv[1:]
            start = int(args[args.index("--start") + 1])
            progress = args[args.index("--progress") + 1]
            count = int(args[args.index("--count") + 1])
            for i in range(start, start + count):
                open(progress, "w").write("%d fake case %d\\n" % (i, i))
                if i == 3:
                    os.kill(os.getpid(), signal.SIGSEGV)
            print('SUMMARY {"cases": %d, "violations": 0, "outcomes": {}}' % count)
            """
        )
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    ran, crashes, violations = _worker(1, 0, 6, 1, tmp_path, timeout=60)
    assert ran == 6 and not violations
    assert len(crashes) == 1 and "in case 3 fake case 3" in crashes[0] and "--only 3" in crashes[0]
    assert "exit status -11" in crashes[0]


MEMORY_LIMIT_SCRIPT = r"""
import resource
LIMIT = 600 << 20
resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))
import numpy as np
import dyn as dy

def expect(errors, f, what):
    try:
        f()
    except errors as e:
        print("ok", what, type(e).__name__)
    else:
        raise SystemExit("no error from " + what)

# more than 2^31 elements: refused at creation, never a wrapped count
expect(ValueError, lambda: dy.transpose(dy.zeros((65536, 65537))).npvalue(), "transpose 2^32")
dy.renew_cg()
expect(ValueError, lambda: dy.sum_elems(dy.ones((65536, 65537))).value(), "sum_elems 2^32")
dy.renew_cg()
expect((ValueError, MemoryError), lambda: dy.random_normal((10**6, 10**6)).npvalue(), "random_normal 10^12")
dy.renew_cg()
# 1.6 GB under a 600 MB limit: MemoryError, and the next graphs work
expect(MemoryError, lambda: dy.random_normal((20000, 20000)).npvalue(), "random_normal 20000^2")
expect(MemoryError, lambda: dy.random_normal((20000, 20000)).npvalue(), "the same graph again")
dy.renew_cg()
x = dy.inputTensor(np.array([1.0, 2.0]))
assert abs(dy.sum_elems(dy.tanh(x)).scalar_value() - np.tanh([1.0, 2.0]).sum()) < 1e-6

m = dy.ParameterCollection()
W = m.add_parameters((1, 3))
b = m.add_parameters((1,))
tr = dy.SimpleSGDTrainer(m, learning_rate=0.1)
rng = np.random.RandomState(0)
X = rng.uniform(-1, 1, size=(32, 3))
Y = X @ np.array([1.5, -2.0, 0.5]) + 0.3
losses = []
for epoch in range(30):
    total = 0.0
    for xv, yv in zip(X, Y):
        dy.renew_cg()
        pred = dy.parameter(W) * dy.inputTensor(xv) + dy.parameter(b)
        loss = dy.squared_distance(pred, dy.inputTensor([yv]))
        total += loss.scalar_value()
        loss.backward()
        tr.update()
    losses.append(total / len(X))
print("losses", losses[0], losses[-1])
assert losses[-1] < 0.01 * losses[0], losses
# and a huge request after training changes nothing learnt
before = W.as_array().copy()
dy.renew_cg()
expect(MemoryError, lambda: (dy.parameter(W) * dy.random_normal((3, 60000000))).npvalue(), "W x huge")
dy.renew_cg()
assert np.array_equal(W.as_array(), before)
print("trained")
"""


def test_memory_limit_then_training_works(tmp_path):
    """Under a 600 MB address-space limit: tensors of 2^31 elements and more
    are a ValueError, an allocation past the limit a MemoryError, and after
    renew_cg() a small model trains as if nothing happened."""
    script = tmp_path / "memlimit.py"
    script.write_text(MEMORY_LIMIT_SCRIPT)
    p = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=180
    )
    assert p.returncode == 0, "exit status %d\nstdout:\n%s\nstderr:\n%s" % (
        p.returncode,
        p.stdout,
        p.stderr[-4000:],
    )
    assert "trained" in p.stdout
    assert p.stdout.count("ok ") == 6, p.stdout
