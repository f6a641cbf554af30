"""Save, kill, load: a process killed (SIGKILL) in the middle of a save
leaves the previous model file whole."""

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import dyn as dy
from dyn.io import _safetensors

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")

# The child builds the same model with other values and saves it over the file.
# With a stall, a test hook stops the writer after its first chunk and says so.
CHILD = textwrap.dedent(
    """
    import sys, time
    import dyn as dy
    from dyn.io import _safetensors

    path, value, stall = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "stall"
    m = dy.ParameterCollection()
    m.add_parameters((512, 512), init=value)
    m.add_lookup_parameters((2000, 256), init=value)
    if sys.argv[4:] == ["own-handler"]:
        import signal
        def leave(signum, frame):
            raise SystemExit(3)
        signal.signal(signal.SIGTERM, leave)
    if stall:
        stalled = []
        def stop_mid_write():  # until the test says "go" (or closes stdin)
            if not stalled:
                stalled.append(1)
                print("mid-write", flush=True)
                sys.stdin.readline()
        _safetensors.CHUNK_BYTES = 1 << 16
        _safetensors._after_chunk = stop_mid_write
    print("saving", flush=True)
    m.save(path)
    print("saved", flush=True)
    """
)


def _model(value):
    m = dy.ParameterCollection()
    W = m.add_parameters((512, 512), init=0.0)
    E = m.add_lookup_parameters((2000, 256), init=0.0)
    return m, W, E, value


def _load(path):
    m, W, E, _ = _model(0.0)
    m.populate(path)
    return W.as_array(), E.as_array()


def _env():
    return dict(
        os.environ,
        PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        OPENBLAS_NUM_THREADS="1",
    )


def _child(path, value, mode, *extra):
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(value), mode, *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=str(ROOT),
    )


def _temp_files(directory):
    return [n for n in os.listdir(directory) if n.endswith(".tmp")]


def _dyn_temps(directory):
    return [n for n in os.listdir(directory) if _safetensors.temp_name_pattern().match(n)]


def _end(child):
    child.kill()
    child.wait(timeout=30)
    child.stdout.close()
    child.stdin.close()


def _saved_old(path):
    m, W, E, _ = _model(1.0)
    W.set_value(np.full((512, 512), 1.0))
    E.init_from_array(np.full((2000, 256), 1.0))
    m.save(path)
    return m


def test_killed_mid_save_leaves_the_old_file(tmp_path):
    path = tmp_path / "model.st"
    m, W, E, _ = _model(1.0)
    W.set_value(np.full((512, 512), 1.0))
    E.init_from_array(np.full((2000, 256), 1.0))
    m.save(path)
    old = path.read_bytes()

    child = _child(path, 2.0, "stall")
    try:
        assert child.stdout.readline().strip() == "saving"
        assert child.stdout.readline().strip() == "mid-write"
        partial = _temp_files(tmp_path)
        assert len(partial) == 1 and (tmp_path / partial[0]).stat().st_size > 0  # really writing
        child.send_signal(signal.SIGKILL)
    finally:
        _end(child)
    assert child.returncode == -signal.SIGKILL

    assert path.read_bytes() == old
    w, e = _load(path)
    assert (w == 1.0).all() and (e == 1.0).all()
    # the leftover temporary file is ignored, and the next save succeeds
    m.save(path)
    assert np.array_equal(_load(path)[0], w)


def test_killed_as_soon_as_the_save_starts_leaves_a_whole_file(tmp_path):
    """No hook: kill the child the moment its temporary file appears. Whatever
    the timing, the file holds either all old values or all new ones."""
    path = tmp_path / "model.st"
    m, W, E, _ = _model(1.0)
    W.set_value(np.full((512, 512), 1.0))
    E.init_from_array(np.full((2000, 256), 1.0))
    m.save(path)

    child = _child(path, 2.0, "plain")
    try:
        assert child.stdout.readline().strip() == "saving"
        deadline = time.monotonic() + 30
        while not _temp_files(tmp_path) and child.poll() is None and time.monotonic() < deadline:
            pass
        child.send_signal(signal.SIGKILL)
    finally:
        _end(child)

    w, e = _load(path)
    assert ((w == 1.0).all() and (e == 1.0).all()) or ((w == 2.0).all() and (e == 2.0).all())


def test_a_save_by_another_live_process_is_never_disturbed(tmp_path):
    """While a child is stalled mid-save, saves and loads here (the same file
    and another) leave its temporary file alone; the child then finishes."""
    path = tmp_path / "model.st"
    m = _saved_old(path)
    child = _child(path, 2.0, "stall")
    try:
        assert child.stdout.readline().strip() == "saving"
        assert child.stdout.readline().strip() == "mid-write"
        partial = _dyn_temps(tmp_path)
        assert len(partial) == 1 and ".dyn-%d-" % child.pid in partial[0]
        m.save(path)
        m.save(tmp_path / "other.st")
        m.populate(path)
        assert _dyn_temps(tmp_path) == partial
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "saved"
        assert child.wait(timeout=30) == 0
    finally:
        _end(child)
    assert _dyn_temps(tmp_path) == []
    w, e = _load(path)
    assert (w == 2.0).all() and (e == 2.0).all()


@pytest.mark.parametrize("handler", ["default", "own-handler"])
def test_sigterm_mid_save_removes_the_temporary_file(tmp_path, handler):
    """SIGTERM with its default action kills as before (status -SIGTERM), after
    removing the temporary file; a handler the program set is kept (here it
    raises SystemExit, and the save cleans up on the way out)."""
    path = tmp_path / "model.st"
    _saved_old(path)
    old = path.read_bytes()
    child = _child(path, 2.0, "stall", handler)
    try:
        assert child.stdout.readline().strip() == "saving"
        assert child.stdout.readline().strip() == "mid-write"
        assert len(_dyn_temps(tmp_path)) == 1
        child.send_signal(signal.SIGTERM)
        status = child.wait(timeout=30)
    finally:
        _end(child)
    assert status == (-signal.SIGTERM if handler == "default" else 3)
    assert sorted(os.listdir(tmp_path)) == ["model.st"] and path.read_bytes() == old


# One process imports dyn once, then forks a saver per kill: a kill costs a fork,
# not a Python start-up. The saver loops: model.st, then dy.save's run.data and
# run.meta, each save with values one higher than the last.
FORKER = textwrap.dedent(
    """
    import os, sys
    import numpy as np
    import dyn as dy

    directory = sys.argv[1]
    for line in sys.stdin:
        value = float(line)
        pid = os.fork()
        if pid == 0:
            try:
                m = dy.ParameterCollection()
                W = m.add_parameters((256, 256), init=0.0)
                E = m.add_lookup_parameters((1000, 128), init=0.0)
                print("ready", os.getpid(), flush=True)
                while True:
                    W.set_value(np.full((256, 256), value))
                    E.init_from_array(np.full((1000, 128), value))
                    m.save(directory + "/model.st")
                    dy.save(directory + "/run", [W, E])
                    value += 1
            finally:
                os._exit(1)
        print("status", os.waitpid(pid, 0)[1], flush=True)
    """
)

KILLS = int(os.environ.get("DYN_TEST_KILLS", "12"))  # 100 for the full run (some 10 s)


def _small(value):
    m = dy.ParameterCollection()
    W = m.add_parameters((256, 256), init=value)
    E = m.add_lookup_parameters((1000, 128), init=value)
    return m, W, E


def _one_value(arrays, where):
    v = arrays[0].flat[0]
    assert all((a == v).all() for a in arrays), "%s holds values of two saves" % where
    return float(v)


def test_random_kills_during_saves(tmp_path, kills=KILLS):
    """Kill a saving process (SIGKILL) at random moments. After each kill every
    file loads whole, with the values of the last save before the kill or of
    the one it interrupted; the next save (or load) here leaves no temporary
    file of dyn's naming. DYN_TEST_KILLS=100 makes it a hundred kills."""
    rng = random.Random(1234)
    d = tmp_path / "saves"
    d.mkdir()
    m, W, E = _small(0.0)
    m.save(d / "model.st")
    dy.save(str(d / "run"), [W, E])
    old = {"model.st": 0.0, "run": 0.0}
    forker = subprocess.Popen(
        [sys.executable, "-c", FORKER, str(d)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=str(ROOT),
    )
    left, mid_save, checks, pid = 0, 0, tmp_path / "copies", None
    checks.mkdir()
    try:
        k = -1
        while k + 1 < kills or (mid_save == 0 and k + 1 < 4 * kills):  # until one lands mid-save
            k += 1
            first = 1000.0 * (k + 1)  # this saver's values: first, first + 1, ...
            forker.stdin.write("%r\n" % first)
            forker.stdin.flush()
            ready, pid = forker.stdout.readline().split()
            assert ready == "ready"
            time.sleep(rng.uniform(0.0, 0.1))  # a save cycle (three files) takes some 10-40 ms
            os.kill(int(pid), signal.SIGKILL)
            said, status = forker.stdout.readline().split()
            assert said == "status"
            status, saver, pid = int(status), pid, None  # reaped
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
            temps = _dyn_temps(d)
            left += bool(temps)
            mid_save += any(".dyn-%s-" % saver in n for n in temps)

            if k % 2:  # check copies, so that the next save is the first to see the temporary files
                for n in ("model.st", "run.data"):
                    shutil.copy(d / n, checks / n)
                m.save(d / "model.st")
                dy.save(str(d / "run"), [W, E])
                assert _dyn_temps(d) == [], "after kill %d" % k
                where = checks
            else:  # the load is the first to see them
                where = d
            m2, W2, E2 = _small(-1.0)
            m2.populate(where / "model.st")
            if where is d:
                assert _dyn_temps(d) == [], "after kill %d" % k
            v = _one_value([W2.as_array(), E2.as_array()], "model.st")
            assert v == old["model.st"] or v >= first, (k, v, old)
            W3, E3 = dy.load(str(where / "run"), dy.ParameterCollection())
            v = _one_value([W3.as_array(), E3.as_array()], "run.data")
            assert v == old["run"] or v >= first, (k, v, old)
            json.loads((d / "run.meta").read_text())

            # known values for the next round
            value = -float(k + 1)
            W.set_value(np.full((256, 256), value))
            E.init_from_array(np.full((1000, 128), value))
            m.save(d / "model.st")
            dy.save(str(d / "run"), [W, E])
            old = {"model.st": value, "run": value}
            assert _dyn_temps(d) == []
    finally:
        if pid is not None:  # a saver the test did not get to kill (it failed first)
            os.kill(int(pid), signal.SIGKILL)
        forker.stdin.close()
        forker.wait(timeout=60)
        forker.stdout.close()
    print(
        "%d kills: %d left a temporary file (%d of the killed saver's own), all removed"
        % (kills, left, mid_save)
    )
    assert mid_save > 0  # some kills did land mid-save
