"""A worker that raises or dies stops every worker and is reported; Ctrl-C stops
the run after a completed step; nothing is left behind."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import dyn as dy
import dyn.parallel as par
from tests.parallel._helpers import Model, child_pids, make_data, shm_entries

MODES = ["async", "sync"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _failing_loss(model, action):
    parent = os.getpid()
    calls = [0]

    def loss(batch):
        calls[0] += 1
        if os.getpid() != parent and calls[0] == 3:
            action()
        return model.loss(batch)

    return loss


def _two_workers(loss, trainer, mode, **kw):
    """The run every failure test starts: 2 workers, 200 examples, 2 a step, 5 epochs."""
    return par.train(
        loss, make_data(200), trainer, workers=2, mode=mode, batch_size=2, epochs=5, progress=False, **kw
    )


def _bad_example():
    raise ValueError("example 17 has no tags")


@pytest.mark.parametrize("mode", MODES)
def test_a_worker_that_raises_stops_the_run_with_its_traceback(mode, tmp_path):
    shm, path = shm_entries(), str(tmp_path / "m.safetensors")
    model = Model()
    with pytest.raises(par.WorkerError) as info:
        _two_workers(_failing_loss(model, _bad_example), dy.AdamTrainer(model.m), mode, save=path)
    text = str(info.value)
    assert "worker 1" in text and "Traceback" in text and "ValueError: example 17 has no tags" in text
    assert "_bad_example" in text
    assert child_pids() == [] and shm_entries() == shm
    assert all(np.isfinite(v).all() for v in model.params().values())
    saved = Model(seed=5)
    saved.m.populate(path)  # saved whole, as of the last completed step
    for k, v in saved.params().items():
        np.testing.assert_array_equal(v, model.params()[k], err_msg=k)


@pytest.mark.parametrize("mode", MODES)
def test_a_killed_worker_is_reported(mode):
    shm = shm_entries()
    model = Model()
    loss = _failing_loss(model, lambda: os.kill(os.getpid(), signal.SIGKILL))
    with pytest.raises(par.WorkerError, match=r"worker 1 \(pid \d+\) was killed by signal SIGKILL"):
        _two_workers(loss, dy.SimpleSGDTrainer(model.m), mode)
    assert child_pids() == [] and shm_entries() == shm


@pytest.mark.parametrize("mode", MODES)
def test_an_error_in_worker_0_stops_the_others_and_saves(mode, tmp_path):
    model, path = Model(), str(tmp_path / "m.safetensors")
    parent, calls = os.getpid(), [0]

    def loss(batch):
        calls[0] += 1
        if os.getpid() == parent and calls[0] == 4:
            raise KeyError("parent's own error")
        return model.loss(batch)

    with pytest.raises(KeyError, match="parent's own error"):
        _two_workers(loss, dy.SimpleSGDTrainer(model.m), mode, save=path)
    assert child_pids() == []
    saved = Model(seed=5)
    saved.m.populate(path)  # async too: the shared parameters once every worker had stopped
    for k, v in saved.params().items():
        np.testing.assert_array_equal(v, model.params()[k], err_msg=k)


SCRIPT = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {root!r})
    import numpy as np
    import dyn as dy
    import dyn.parallel as par
    from tests.parallel._helpers import Model, child_pids, make_data, shm_entries

    shm = shm_entries()
    model = Model()
    def loss(batch):
        time.sleep(0.01)
        if not os.path.exists({flag!r}):
            open({flag!r}, "w").close()
        return model.loss(batch)
    try:
        par.train(loss, make_data(2000), dy.AdamTrainer(model.m), workers=2, mode={mode!r}, batch_size=2,
                  epochs=5, progress=True, save={path!r})
    except KeyboardInterrupt:
        saved = Model(seed=5)
        saved.m.populate({path!r})
        same = all(np.array_equal(v, model.params()[k]) for k, v in saved.params().items())
        print("INTERRUPTED children=%d shm_same=%s saved_same=%s"
              % (len(child_pids()), shm_entries() == shm, same))
""")


@pytest.mark.parametrize("mode", MODES)
def test_ctrl_c_stops_every_worker_and_saves_the_last_step(mode, tmp_path):
    flag, path = str(tmp_path / "started"), str(tmp_path / "m.safetensors")
    script = SCRIPT.format(root=ROOT, flag=flag, path=path, mode=mode)
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        for _ in range(600):
            if os.path.exists(flag) or proc.poll() is not None:
                break
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole process group
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert "INTERRUPTED children=0 shm_same=True saved_same=True" in out, err
