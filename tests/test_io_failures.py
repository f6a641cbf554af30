"""Saves that fail and files that lie: temporary files are removed (on every
exit Python sees, and, left by a killed save, by the next save or load in the
directory, never while their writer lives), disk-full and file-size errors
keep their errno and name the file, and hostile files raise ModelFileError
naming the file and change nothing."""

import errno
import fcntl
import json
import os
import pickle
import struct
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

import dyn as dy
from dyn import io
from dyn.io import ModelFileError
from dyn.io import _safetensors as st

ROOT = Path(__file__).resolve().parent.parent


def _temps(directory):
    return sorted(n for n in os.listdir(directory) if st.temp_name_pattern().match(n))


def _model(value=1.0):
    m = dy.ParameterCollection()
    W = m.add_parameters((30, 20), init=value, name="W")
    E = m.add_lookup_parameters((10, 4), init=value, name="E")
    return m, W, E


def _abandoned(directory, name="model.st", pid=999999999):
    """A temporary file as a save killed mid-write leaves it."""
    path = Path(directory) / (".%s.dyn-%d-ab_cd012.tmp" % (name, pid))
    path.write_bytes(b"partial")
    return path


# ---------------------------------------------------------------- temporary files


def test_saves_name_their_temporary_files_recognisably(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(st, "_after_chunk", lambda: seen.extend(_temps(tmp_path)))
    m, _, _ = _model()
    m.save(tmp_path / "model.st")
    assert seen and all(n.startswith(".model.st.dyn-%d-" % os.getpid()) for n in seen)
    assert _temps(tmp_path) == []
    long_name = "m" * 240 + ".st"  # the temporary name is cut to stay a legal file name
    m.save(tmp_path / long_name)
    assert sorted(os.listdir(tmp_path)) == sorted(["model.st", long_name])


@pytest.mark.parametrize("how", ["save", "load", "dy.save", "dy.load", "trainer", "text"])
def test_the_next_save_or_load_removes_abandoned_temporary_files(tmp_path, how):
    m, W, E = _model()
    m.save(tmp_path / "model.st")
    m.save(tmp_path / "model.txt", format="text")
    dy.save(str(tmp_path / "run"), [W, E])
    stale = [_abandoned(tmp_path), _abandoned(tmp_path, "run.data"), _abandoned(tmp_path, "ckpt-7.st", 1)]
    keep = [
        ".model.st.abcdefgh.tmp",
        "other.tmp",
        ".model.st.dyn-12-short.tmp",
        "model.st.dyn-1-abcdefgh.tmp",
    ]
    for n in keep:
        (tmp_path / n).write_bytes(b"not dyn's")
    (tmp_path / ".x.dyn-5-abcdefgh.tmp").mkdir()  # not a file
    os.symlink(tmp_path / "model.st", tmp_path / ".y.dyn-5-abcdefgh.tmp")  # not a file either
    before = _temps(tmp_path)
    assert len(before) == 5

    sgd = dy.SimpleSGDTrainer(m)
    {
        "save": lambda: m.save(tmp_path / "model.st"),
        "load": lambda: m.populate(tmp_path / "model.st"),
        "dy.save": lambda: dy.save(str(tmp_path / "run"), [W]),
        "dy.load": lambda: dy.load(str(tmp_path / "run"), dy.ParameterCollection()),
        "trainer": lambda: io.save_trainer(tmp_path / "sgd.st", sgd),
        "text": lambda: m.populate(tmp_path / "model.txt"),
    }[how]()
    assert not any(p.exists() for p in stale)
    assert _temps(tmp_path) == [".x.dyn-5-abcdefgh.tmp", ".y.dyn-5-abcdefgh.tmp"]
    assert all((tmp_path / n).read_bytes() == b"not dyn's" for n in keep)
    assert os.path.islink(tmp_path / ".y.dyn-5-abcdefgh.tmp") and (tmp_path / "model.st").exists()


def test_a_temporary_file_whose_writer_lives_is_never_removed(tmp_path):
    """A save holds a lock on its temporary file: a live writer, in this process
    or another, even one whose pid looks dead (another pid namespace), keeps it."""
    live = _abandoned(tmp_path, pid=1)
    fd = os.open(live, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert st.remove_stale_temps(tmp_path) == []
        m, _, _ = _model()
        m.save(tmp_path / "model.st")
        m.populate(tmp_path / "model.st")
        assert live.exists()
    finally:
        os.close(fd)  # the writer dies: its lock goes
    assert st.remove_stale_temps(tmp_path) == [live.name] and not live.exists()


def test_a_save_in_another_thread_is_not_disturbed(tmp_path, monkeypatch):
    m, W, _ = _model(1.0)
    m2, _, _ = _model(2.0)
    mid, go = threading.Event(), threading.Event()

    def pause():
        if threading.current_thread() is not threading.main_thread() and not mid.is_set():
            mid.set()
            assert go.wait(30)

    monkeypatch.setattr(st, "CHUNK_BYTES", 1024)
    monkeypatch.setattr(st, "_after_chunk", pause)
    errors = []
    writer = threading.Thread(target=lambda: _run(errors, m.save, tmp_path / "a.st"))
    writer.start()
    try:
        assert mid.wait(30)
        (partial,) = _temps(tmp_path)
        m2.save(tmp_path / "b.st")  # a save and a load in the same directory meanwhile
        m2.populate(tmp_path / "b.st")
        assert _temps(tmp_path) == [partial]
    finally:
        go.set()
        writer.join(30)
    assert errors == [] and _temps(tmp_path) == []
    m2.populate(tmp_path / "a.st")
    assert (m2.parameters_list()[0].as_array() == 1.0).all()


def _run(errors, f, *args):
    try:
        f(*args)
    except BaseException as e:  # noqa: BLE001 (reported to the test thread)
        errors.append(e)


@pytest.mark.parametrize("exc", [KeyboardInterrupt, RuntimeError, MemoryError])
def test_an_interrupted_save_removes_its_temporary_file(tmp_path, monkeypatch, exc):
    m, W, _ = _model(1.0)
    m.save(tmp_path / "model.st")
    old = (tmp_path / "model.st").read_bytes()

    def interrupt():
        assert len(_temps(tmp_path)) == 1
        raise exc("stop")

    monkeypatch.setattr(st, "_after_chunk", interrupt)
    W.set_value(np.full((30, 20), 2.0))
    with pytest.raises(exc):
        m.save(tmp_path / "model.st")
    with pytest.raises(exc):
        dy.save(str(tmp_path / "run"), [W])
    assert sorted(os.listdir(tmp_path)) == ["model.st"]
    assert (tmp_path / "model.st").read_bytes() == old


# ---------------------------------------------------------------- disk full, file too large


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EFBIG, errno.EDQUOT])
@pytest.mark.parametrize("where", ["write", "fsync"])
def test_disk_full_keeps_the_errno_names_the_file_and_the_old_file(tmp_path, monkeypatch, code, where):
    m, W, _ = _model(1.0)
    target = tmp_path / "model.st"
    m.save(target)
    old = target.read_bytes()

    def fail(*args):
        raise OSError(code, os.strerror(code))

    if where == "write":  # the disk fills up after the first 100 bytes
        real_fdopen = os.fdopen
        monkeypatch.setattr(os, "fdopen", lambda *a, **k: _FillsUp(real_fdopen(*a, **k), 100, code))
    else:
        monkeypatch.setattr(os, "fsync", fail)
    W.set_value(np.full((30, 20), 2.0))
    for save, name in [
        (lambda: m.save(target), "model.st"),
        (lambda: m.save(tmp_path / "new.st"), "new.st"),
        (lambda: dy.save(str(tmp_path / "run"), [W]), "run.data"),
        (lambda: m.save(tmp_path / "model.txt", format="text"), "model.txt"),
        (lambda: io.save_trainer(tmp_path / "sgd.st", dy.SimpleSGDTrainer(m)), "sgd.st"),
    ]:
        with pytest.raises(OSError) as err:
            save()
        assert err.value.errno == code and err.value.filename == str(tmp_path / name)
        assert str(tmp_path / name) in str(err.value) and os.strerror(code) in str(err.value)
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == ["model.st"] and target.read_bytes() == old


class _FillsUp:
    """A binary file on a device with ``room`` bytes left."""

    def __init__(self, f, room, code):
        self.f, self.room, self.code = f, room, code

    def write(self, data):
        n = len(memoryview(data).cast("B"))
        if n > self.room:
            raise OSError(self.code, os.strerror(self.code))
        self.room -= n
        return self.f.write(data)

    def __getattr__(self, name):
        return getattr(self.f, name)


def test_errors_before_writing_name_the_target(tmp_path):
    m, _, _ = _model()
    with pytest.raises(FileNotFoundError) as err:
        m.save(tmp_path / "no" / "such" / "model.st")
    assert err.value.filename == str(tmp_path / "no" / "such" / "model.st")
    (tmp_path / "ro").mkdir()
    os.chmod(tmp_path / "ro", 0o500)
    try:
        if os.access(tmp_path / "ro", os.W_OK):
            pytest.skip("running as root: permissions are not enforced")
        with pytest.raises(PermissionError, match="ro/model.st"):
            m.save(tmp_path / "ro" / "model.st")
    finally:
        os.chmod(tmp_path / "ro", 0o700)


FSIZE_CHILD = textwrap.dedent(
    """
    import json, os, resource, signal, sys
    import dyn as dy
    path = sys.argv[1]
    m = dy.ParameterCollection()
    m.add_parameters((512, 512), init=2.0)  # 1 MiB
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
    try:
        m.save(path)
        print(json.dumps({"saved": True}))
    except OSError as e:
        print(json.dumps({"errno": e.errno, "type": type(e).__name__, "message": str(e),
                          "filename": e.filename}))
    """
)


def test_file_size_limit_raises_efbig_naming_the_file(tmp_path):
    target = tmp_path / "model.st"
    small = dy.ParameterCollection()
    small.add_parameters((512, 512), init=1.0)
    small.save(target)
    old = target.read_bytes()
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run(
        [sys.executable, "-c", FSIZE_CHILD, str(target)], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["errno"] == errno.EFBIG and got["filename"] == str(target), got
    assert str(target) in got["message"] and "nothing saved" in got["message"]
    assert sorted(os.listdir(tmp_path)) == ["model.st"] and target.read_bytes() == old


# ---------------------------------------------------------------- hostile files


def _dynet_files(base, meta_bytes):
    Path(base + ".data").write_text("#Parameter# /W {2} 31 ZERO_GRAD\n+1.00000000e+00 +2.00000000e+00\n")
    Path(base + ".meta").write_bytes(meta_bytes)


def _nested_pickle(depth):
    return b"\x80\x02" + b"]" * depth + b"a" * (depth - 1) + b"."


def _laughs(levels):
    """A pickle of a list of two references to a list of two references to ...:
    a few bytes that stand for 2**levels values."""
    out = b"\x80\x02(]q\x00"  # MARK, EMPTY_LIST, BINPUT 0
    for k in range(levels):  # [x, x] where x is memo k, put as memo k + 1
        out += b"](h" + bytes([k]) + b"h" + bytes([k]) + b"eq" + bytes([k + 1])
    return out + b"l."  # all of them in one list


@pytest.mark.parametrize(
    "meta, message",
    [
        (_nested_pickle(100_000), "nested deeper than 100 levels"),
        (_nested_pickle(500), "nested deeper than 100 levels"),
        (_laughs(60), "more than 100000 values"),
        (b"\x80\x02]q\x00h\x00a.", "nested deeper than 100 levels"),  # a list that holds itself
        (pickle.dumps(("Parameters", "/W")) + b"\x80\x02" + b"(" * 1000 + b"t.", "object 1 is not a record"),
        (pickle.dumps(("Parameters", "/W"))[:-3], "malformed pickle"),
    ],
    ids=["nested-100000", "nested-500", "shared-2**60", "holds-itself", "marks-left", "cut-short"],
)
def test_hostile_dynet_meta_files_raise_model_file_error(tmp_path, meta, message):
    base = str(tmp_path / "run")
    _dynet_files(base, meta)
    params = dy.ParameterCollection()
    with pytest.raises(ModelFileError, match=message) as err:
        dy.load(base, params)
    assert base + ".meta" in str(err.value) and len(str(err.value)) < 500
    assert params.parameters_list() == []


def _rewrite_meta(path, key, value):
    tensors, meta = st.read(path)
    meta[key] = value
    st.write(path, tensors.items(), meta)


def test_hostile_dyn_metadata_raises_model_file_error(tmp_path):
    m, W, E = _model()
    lstm = dy.VanillaLSTMBuilder(1, 2, 3, m)
    base = str(tmp_path / "run")
    dy.save(base, [W, E, lstm])
    objects = json.loads(st.read(base + ".data")[1]["objects"])
    deep = json.loads("[" * 500 + "]" * 500)
    cases = [
        ("objects", [dict(objects[2], spec=deep)], "spec: values nested deeper than 100 levels"),
        ("objects", [dict(objects[2], spec={"tuple": deep})], "spec: values nested deeper than 100 levels"),
        ("objects", [deep], "object 0 is malformed: \\[\\[\\[\\[...\\]\\]\\]\\]"),
        ("entries", [deep], "entry 0 is malformed"),
        ("objects", [{"type": "Affine2", "name": "/a/", "entries": [0, 0], "spec": 1}], "not a registered"),
        ("objects", [{"type": ["x"] * 10000, "name": "/", "entries": [0, 0]}], "malformed"),
        ("objects", [dict(objects[2], spec={"class": ["VanillaLSTMBuilder"]})], "bad spec value"),
    ]
    for key, value, message in cases + [("objects", None, "not valid JSON")]:
        dy.save(base, [W, E, lstm])
        _rewrite_meta(base + ".data", key, json.dumps(value) if value else "[" * 100_000 + "]" * 100_000)
        params = dy.ParameterCollection()
        with pytest.raises(ModelFileError, match=message) as err:
            dy.load(base, params)
        assert str(err.value).startswith(base + ".data: ") and len(str(err.value)) < 500
        assert params.parameters_list() == []


def test_a_spec_its_class_rejects_is_a_model_file_error(tmp_path):
    m = dy.ParameterCollection()
    lstm = dy.VanillaLSTMBuilder(1, 2, 3, m)
    base = str(tmp_path / "run")
    dy.save(base, [lstm])
    tensors, meta = st.read(base + ".data")
    objects = json.loads(meta["objects"])
    objects[0]["spec"]["tuple"][-1]["dict"]["no_such_option"] = 1
    _rewrite_meta(base + ".data", "objects", json.dumps(objects))
    with pytest.raises(ModelFileError, match=r"run.data: the saved VanillaLSTMBuilder .* does not build one"):
        dy.load(base, dy.ParameterCollection())


def test_hostile_safetensors_headers_and_text_files(tmp_path):
    def header_file(header):
        raw = json.dumps(header).encode()
        path = tmp_path / "h.st"
        path.write_bytes(struct.pack("<Q", len(raw)) + raw)
        return path

    bad = [
        ({"a": {"dtype": [], "shape": [], "data_offsets": [0, 0]}}, "unknown dtype"),
        ({"a": {"dtype": {"x": 1}, "shape": [], "data_offsets": [0, 0]}}, "unknown dtype"),
        (
            {"__metadata__": {"a": "b"}, "a": {"dtype": "F32", "shape": [[[[]]]], "data_offsets": [0, 0]}},
            "shape",
        ),
    ]
    for header, message in bad:
        with pytest.raises(ModelFileError, match=message):
            st.SafeTensorsFile(header_file(header))
    m = dy.ParameterCollection()
    W = m.add_parameters(2, init=5.0)
    for dims in ["9" * 5000, "4294967296,4294967296", "99999999999999999999"]:
        path = tmp_path / "t.txt"
        path.write_text("#Parameter# /W {%s} 1 ZERO_GRAD\n+1.0 +2.0\n" % dims)
        with pytest.raises(ModelFileError, match="t.txt: line"):
            m.load_param(path, "/W")
        with pytest.raises(ModelFileError, match="t.txt: line"):
            m.populate(path)
        assert (W.as_array() == 5.0).all() and len(m.parameters_list()) == 1
