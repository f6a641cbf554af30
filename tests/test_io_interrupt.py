"""Save, kill, load: a process killed (SIGKILL) in the middle of a save
leaves the previous model file whole."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import dyn as dy

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")

# The child builds the same model with other values and saves it over the file.
# With a stall, a test hook stops the writer after its first chunk and says so.
CHILD = textwrap.dedent(
    """
    import sys, time
    import dyn as dy
    from dyn import _safetensors

    path, value, stall = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "stall"
    m = dy.ParameterCollection()
    m.add_parameters((512, 512), init=value)
    m.add_lookup_parameters((2000, 256), init=value)
    if stall:
        def stop_mid_write():
            print("mid-write", flush=True)
            time.sleep(300)
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


def _child(path, value, mode):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(value), mode],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(ROOT),
    )


def _temp_files(directory):
    return [n for n in os.listdir(directory) if n.endswith(".tmp")]


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
        child.kill()
        child.wait(timeout=30)
        child.stdout.close()
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
        child.kill()
        child.wait(timeout=30)
        child.stdout.close()

    w, e = _load(path)
    assert ((w == 1.0).all() and (e == 1.0).all()) or ((w == 2.0).all() and (e == 2.0).all())
