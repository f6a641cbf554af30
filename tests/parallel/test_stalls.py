"""A worker that makes no progress (stopped, say) is reported and the run stopped; a worker
that computes or waits is not; no worker outlives worker 0, stopped or not."""

import multiprocessing as mp
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
from dyn.parallel import _local
from tests.parallel._helpers import Model, child_pids, make_data, shm_entries

MODES = ["async", "sync"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _rank():
    """This process's worker index (0: the process that called train)."""
    name = mp.current_process().name
    return int(name.rsplit(" ", 1)[1]) if name.startswith("dyn.parallel worker") else 0


def _loss_doing(model, actions):
    """model.loss, but worker r runs actions[r]() once, at its third batch."""
    calls = [0]

    def loss(batch):
        calls[0] += 1
        if calls[0] == 3 and _rank() in actions:
            actions[_rank()]()
        return model.loss(batch)

    return loss


def _stop_myself():
    os.kill(os.getpid(), signal.SIGSTOP)


def _state(pid):
    """The state letter of a process in /proc, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _run(loss, model, mode, workers=2, examples=200, epochs=5, **kw):
    return par.train(
        loss,
        make_data(examples),
        dy.SimpleSGDTrainer(model.m),
        workers=workers,
        mode=mode,
        batch_size=2,
        epochs=epochs,
        progress=False,
        **kw,
    )


@pytest.mark.parametrize("mode", MODES)
def test_a_stopped_worker_is_reported_with_its_state_and_the_model_saved(mode, tmp_path):
    shm, path = shm_entries(), str(tmp_path / "m.safetensors")
    model = Model()
    t0 = time.monotonic()
    with pytest.raises(par.WorkerStalledError) as info:
        _run(_loss_doing(model, {1: _stop_myself}), model, mode, stall_timeout=1, save=path)
    seconds = time.monotonic() - t0
    err = info.value
    assert isinstance(err, par.WorkerError)
    assert err.rank == 1 and err.state == "stopped (T)" and err.seconds >= 1.0
    assert "worker 1 (pid %d) made no progress" % err.pid in str(err)
    assert "stopped (T)" in str(err) and "stall_timeout=1" in str(err)
    assert seconds < 30  # reported, not hung (it takes about the timeout)
    assert _state(err.pid) is None  # terminated and reaped
    assert child_pids() == [] and shm_entries() == shm
    saved = Model(seed=5)
    saved.m.populate(path)  # the model as of the stop
    for k, v in saved.params().items():
        np.testing.assert_array_equal(v, model.params()[k], err_msg=k)


def test_a_stalled_worker_among_three_stops_the_others_too():
    model = Model()
    with pytest.raises(par.WorkerStalledError, match=r"worker 2 \(pid \d+\) made no progress") as info:
        _run(_loss_doing(model, {2: _stop_myself}), model, "sync", workers=3, stall_timeout=1)
    assert info.value.rank == 2
    assert "worker 1" not in str(info.value)  # the worker that was only waiting is no culprit
    assert child_pids() == []


def _busy(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


@pytest.mark.parametrize("mode", MODES)
def test_a_long_step_that_computes_is_no_stall(mode):
    model = Model()
    loss = _loss_doing(model, {1: lambda: _busy(1.5)})  # 1.5 s of CPU in one step of worker 1
    result = _run(loss, model, mode, examples=20, epochs=1, stall_timeout=0.5)
    assert result.examples == 20 and child_pids() == []


@pytest.mark.parametrize("mode", MODES)
def test_workers_waiting_for_a_long_dev_on_worker_0_are_no_stall(mode):
    model = Model()

    def dev():
        time.sleep(1.5)  # worker 0 neither steps nor uses CPU; the others wait at the barrier
        return {"x": 1.0}

    result = _run(model.loss, model, mode, examples=20, epochs=1, dev=dev, stall_timeout=0.5)
    assert result.examples == 20 and len(result.dev) == 1 and child_pids() == []


@pytest.mark.parametrize("mode", MODES)
def test_without_stall_timeout_a_stopped_worker_is_still_ended_with_the_run(mode, monkeypatch):
    # stall_timeout=None: nothing watches for stalls; when another worker fails, the run stops and
    # the stopped worker, which cannot act on SIGTERM, is continued and terminated all the same
    monkeypatch.setattr(_local, "JOIN_S", 1.0)
    shm = shm_entries()
    model = Model()

    def fail_later():
        time.sleep(0.5)  # worker 1 is stopped by then
        raise ValueError("worker 2's own error")

    loss = _loss_doing(model, {1: _stop_myself, 2: fail_later})
    with pytest.raises(par.WorkerError) as info:
        _run(loss, model, mode, workers=3, stall_timeout=None)
    text = str(info.value)
    assert not isinstance(info.value, par.WorkerStalledError)
    assert "ValueError: worker 2's own error" in text
    assert "worker 1 (pid" in text and "(it was stopped (T)), so it was terminated" in text
    assert child_pids() == [] and shm_entries() == shm


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf")])
def test_a_bad_stall_timeout_is_refused(value):
    model = Model()
    with pytest.raises(ValueError, match="stall_timeout must be > 0"):
        _run(model.loss, model, "sync", stall_timeout=value)


def test_a_stall_timeout_that_is_no_number_is_refused():
    model = Model()
    with pytest.raises(TypeError, match="stall_timeout must be a number of seconds or None"):
        _run(model.loss, model, "sync", stall_timeout="60")


ORPHAN_SCRIPT = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {root!r})
    import dyn as dy
    import dyn.parallel as par
    from tests.parallel._helpers import Model, make_data

    model = Model()
    def loss(batch):
        time.sleep(0.01)
        if not os.path.exists({flag!r}):
            open({flag!r}, "w").close()
        return model.loss(batch)
    par.train(loss, make_data(5000), dy.SimpleSGDTrainer(model.m), workers=3, mode={mode!r}, batch_size=2,
              epochs=5, progress=False, stall_timeout=None)
""")


def _children_of(pid):
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(entry))
    return out


@pytest.mark.parametrize("mode", MODES)
def test_no_worker_outlives_a_killed_parent_even_a_stopped_one(mode, tmp_path):
    flag, log = str(tmp_path / "started"), tmp_path / "stderr.txt"
    with open(log, "w") as err:  # a file, not a pipe: a surviving worker would hold a pipe open
        proc = subprocess.Popen(
            [sys.executable, "-c", ORPHAN_SCRIPT.format(root=ROOT, flag=flag, mode=mode)],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    workers = []
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(flag) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = _children_of(proc.pid)
        assert len(workers) == 2, log.read_text()
        os.kill(workers[0], signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while _state(workers[0]) != "T" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _state(workers[0]) == "T"
        proc.kill()  # SIGKILL: the parent has no chance to stop its workers itself
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        while any(_state(p) not in (None, "Z") for p in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [_state(p) for p in workers if _state(p) not in (None, "Z")] == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in workers:  # a failed assertion must not leave them behind either
            if _state(pid) not in (None, "Z"):
                os.kill(pid, signal.SIGKILL)


TWICE_SCRIPT = textwrap.dedent("""
    import multiprocessing as mp, os, sys, time
    sys.path.insert(0, {root!r})
    import dyn as dy
    import dyn.parallel as par
    from dyn.parallel import _local
    from tests.parallel._helpers import Model, child_pids, make_data

    _local.INTERRUPT_JOIN_S = 1.0  # how long a run stopped by Ctrl-C waits for a worker (sync)
    model, calls = Model(), [0]
    def loss(batch):
        calls[0] += 1
        if mp.current_process().name.startswith("dyn.parallel worker") and calls[0] == 3:
            open({flag!r}, "w").close()
            time.sleep(120)  # a step far longer than the test: only terminating it ends it
        return model.loss(batch)
    try:
        par.train(loss, make_data(100000), dy.SimpleSGDTrainer(model.m), workers=2, mode={mode!r},
                  batch_size=2, epochs=1, progress=False, stall_timeout=None, save={path!r})
    except KeyboardInterrupt:
        print("INTERRUPTED children=%d saved=%s" % (len(child_pids()), os.path.exists({path!r})))
""")


@pytest.mark.parametrize("mode", MODES)
def test_a_second_ctrl_c_ends_a_worker_in_a_long_step(mode, tmp_path):
    # the first Ctrl-C waits for the step in progress; the second does not wait for it
    flag, path = str(tmp_path / "started"), str(tmp_path / "m.safetensors")
    script = TWICE_SCRIPT.format(root=ROOT, flag=flag, path=path, mode=mode)
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(flag) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)  # the sleeping worker would take 120 s
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "INTERRUPTED children=0 saved=True" in out, err
