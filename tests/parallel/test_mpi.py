"""dyn.parallel over MPI: ``mpiexec -n 2`` / ``-n 4`` on loopback, started by the tests.

The ranks run tests/parallel/_mpi_worker.py and write what they got; the
checks and the single-process reference are computed here. Skipped, with the
reason, where mpi4py or an ``mpiexec`` is not installed (``pip install 'dyn[mpi]'``).
"""

import os
import subprocess
import sys

import numpy as np
import pytest

import dyn as dy
from dyn.parallel._mpi import find_mpiexec
from dyn.parallel._sync import epoch_order
from tests.parallel._helpers import Model, read_json, tagger_example_args, write_tagging_data

pytest.importorskip("mpi4py", reason="the MPI tests need mpi4py and an MPI: pip install 'dyn[mpi]'")

from tests.parallel import _mpi_worker as worker  # noqa: E402

WORKER = worker.__file__
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(WORKER))))
STEPS, BATCH = 100, 2  # 100 synchronous steps of BATCH examples per rank
# float32: the ranks sum the batch's gradients in another order than one process; the largest
# difference seen after 100 steps is 6e-7 (one process summing its batch in reverse order differs
# from itself by as much), and data-parallel training must stay within 1e-5. The learning rates are
# small enough that training does not amplify rounding (momentum at lr 0.05 does: 2e-4 between the
# two orders).
TOL = 1e-5


MPIEXEC = find_mpiexec()
pytestmark = pytest.mark.skipif(
    MPIEXEC is None,
    reason="no mpiexec/mpirun found next to %s or on PATH "
    "(pip install 'dyn[mpi]' installs MPICH's)" % sys.executable,
)


def run_mpi(n, *args, script=WORKER, timeout=120, launcher=(), env_extra=None):
    """``mpiexec -n n python script args``; fails the test with the ranks' output on an error."""
    env = dict(
        os.environ,
        OPENBLAS_NUM_THREADS="1",
        OMP_NUM_THREADS="1",
        PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])),
        **(env_extra or {}),
    )
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")  # Open MPI, when run as root
    cmd = [MPIEXEC, "-n", str(n), *launcher, sys.executable, script, *args]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail("%s timed out after %ss:\n%s\n%s" % (" ".join(cmd), timeout, e.stdout, e.stderr))
    if proc.returncode != 0:
        pytest.fail("%s exited with %d:\n%s\n%s" % (" ".join(cmd), proc.returncode, proc.stdout, proc.stderr))
    return proc


def load(out, name, rank):
    with np.load(os.path.join(out, "%s.rank%d.npz" % (name, rank))) as f:
        return dict(f)


@pytest.mark.parametrize("n", [2, 4])
def test_collectives(tmp_path, n):
    run_mpi(n, "exchange", str(tmp_path))
    want_idx = np.concatenate([np.arange(r) + 100 * r for r in range(n)])
    want_rows = np.concatenate([np.arange(r * 3).reshape(r, 3) + 1000 * r for r in range(n)])
    for r in range(n):
        got = load(tmp_path, "exchange", r)
        for dtype in ("float32", "float64"):
            buf = got["sum_" + dtype]
            assert buf.dtype == dtype
            np.testing.assert_array_equal(buf, sum(np.arange(7) + 10.0 * q for q in range(n)))
        assert got["gather_idx"].dtype == np.int64 and got["gather_rows"].dtype == np.float32
        np.testing.assert_array_equal(got["gather_idx"], want_idx)
        np.testing.assert_array_equal(got["gather_rows"], want_rows)
        for root in range(n):
            np.testing.assert_array_equal(got["bcast_%d" % root], np.full(5, float(root)))
        assert int(got["local_size"]) == n  # loopback: every rank on this machine
        assert set(got["blas_in_train"].tolist()) == {max(1, int(got["cores"]) // n)}


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="binding 2 ranks to their own cores needs 2")
def test_ranks_bound_to_their_own_cores_do_not_share_them(tmp_path):
    """local_size counts the ranks whose cores overlap this one's: unbound ranks on one machine
    share every core (2; test_collectives), ranks bound to a core each share nothing (1), so each
    keeps its own cores for BLAS."""
    run_mpi(2, "cores", str(tmp_path), launcher=("-bind-to", "core"))
    got = [load(tmp_path, "cores", r) for r in range(2)]
    assert [len(g["cores"]) for g in got] == [1, 1] and got[0]["cores"][0] != got[1]["cores"][0]
    assert [int(g["local_size"]) for g in got] == [1, 1]


# every trainer with sparse (exact catch-up) and dense lookup updates on 2 ranks, and a table read
# whole; on 4 ranks (2 cores: oversubscribed, slower) the three the issue names
CASES = {
    2: ["%s-%s" % (t, m) for t in worker.TRAINERS for m in ("sparse", "dense")] + ["adam-whole"],
    4: ["%s-%s" % (t, m) for t in ("sgd", "momentum", "adam") for m in ("sparse", "dense")],
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """size -> the folder where that many ranks trained every case of CASES[size] (run once)."""
    runs = {}

    def get(n):
        if n not in runs:
            out = tmp_path_factory.mktemp("mpi%d" % n)
            run_mpi(n, "train", str(out), ",".join(CASES[n]), str(BATCH), str(STEPS), timeout=300)
            runs[n] = str(out)
        return runs[n]

    return get


def reference(case, n):
    """One process on the combined batches: global batches of n*BATCH in the same order."""
    make_trainer, sparse, whole = worker.case_config(case)
    data = worker.case_data(n, BATCH, STEPS)
    model = Model(seed=1)
    trainer = make_trainer(model.m)
    trainer.set_sparse_updates(sparse or whole)
    order, gb, total = epoch_order(len(data), 0, 0), n * BATCH, 0.0
    for start in range(0, len(data), gb):
        dy.renew_cg()
        batch = [data[i] for i in order[start : start + gb]]
        loss = (model.whole_table_loss if whole else model.loss)(batch)
        total += loss.value()
        loss.backward()
        trainer.update()
    return model.params(), total / len(data)


@pytest.mark.parametrize("n,case", [(n, c) for n in sorted(CASES) for c in CASES[n]])
def test_ranks_equal_one_process_on_the_combined_batch(trained, n, case):
    """Rank r starts from Model(seed=1 + r): only the broadcast at start makes them all
    rank 0's values, the reference's start."""
    out = trained(n)
    want, want_loss = reference(case, n)
    start = Model(seed=1).params()
    assert max(np.abs(want[k] - start[k]).max() for k in want) > 1e-2  # training moved the parameters
    ranks = [load(out, case, r) for r in range(n)]
    for r, got in enumerate(ranks):
        diff = max(np.abs(got[k] - want[k]).max() for k in want)
        assert diff <= TOL, "rank %d of %d, %s: max abs difference %.3g from one process" % (r, n, case, diff)
        for k in want:  # the replicas are equal to the bit: every rank reduces in the same order
            np.testing.assert_array_equal(got[k], ranks[0][k], err_msg="rank %d, %s" % (r, k))
        assert int(got["steps"]) == STEPS and int(got["examples"]) == n * BATCH * STEPS
        assert float(got["loss"]) == pytest.approx(want_loss, rel=1e-5)


GPU_CASES = ["adam-sparse", "adam-dense", "momentum-dense", "adam-whole"]


def test_ranks_with_parameters_on_the_gpu_equal_one_process_on_the_combined_batch(tmp_path):
    """Each rank its own process with its parameters on GPU:0 (several ranks share one GPU; where
    there is none, the GPU device's stand-in): gradients exchanged through the host, and after
    100 steps every rank equals one CPU process trained on the combined batches."""
    from tests.conftest import GPU_SKIP_REASON

    if GPU_SKIP_REASON is not None:
        pytest.skip("no GPU device: %s" % GPU_SKIP_REASON)
    run_mpi(2, "train", str(tmp_path), ",".join(GPU_CASES), str(BATCH), str(STEPS), timeout=300,
            env_extra={"DYN_DEVICE": "GPU:0"})
    for case in GPU_CASES:
        want, want_loss = reference(case, 2)
        for r in range(2):
            got = load(str(tmp_path), case, r)
            diff = max(np.abs(got[k] - want[k]).max() for k in want)
            assert diff <= TOL, "rank %d, %s: max abs difference %.3g from one process" % (r, case, diff)
            assert str(got["device"]) == "GPU:0"
            assert float(got["loss"]) == pytest.approx(want_loss, rel=1e-5)


@pytest.mark.parametrize("n", [2, 4])
def test_rank_zero_alone_saves_the_checkpoint(trained, n):
    out = trained(n)
    case = CASES[n][0]
    written = sorted(f for f in os.listdir(out) if ".ckpt." in f)
    assert written == sorted("%s.ckpt.rank0" % c for c in CASES[n])  # no other rank, no temporary left
    saved = Model(seed=5)
    saved.m.populate(os.path.join(out, "%s.ckpt.rank0" % case))
    final = load(out, case, 0)
    for k, v in saved.params().items():
        np.testing.assert_array_equal(v, final[k], err_msg=k)
    assert not [f for f in os.listdir(out) if "tmp" in f]


def test_mpi_tagger_example_trains_like_one_process(tmp_path):
    """examples/mpi_tagger.py on 2 ranks is the one-process run on the combined batch, and learns."""
    data = write_tagging_data(tmp_path / "data")
    figures = {}
    for ranks, batch in ((1, 8), (2, 4)):
        extra, out = tagger_example_args(tmp_path, "ranks%d" % ranks)
        run_mpi(
            ranks, data, "--batch", str(batch), *extra, script=os.path.join(REPO, "examples", "mpi_tagger.py")
        )
        figures[ranks] = read_json(out)
    one, two = figures[1], figures[2]
    assert (
        (two["ranks"], two["steps"], two["sentences"]) == (2, one["steps"], one["sentences"]) == (2, 36, 288)
    )
    assert two["train_loss"] == pytest.approx(one["train_loss"], rel=1e-5)
    assert two["dev_acc"] == one["dev_acc"] > 0.9  # chance is 1/3
