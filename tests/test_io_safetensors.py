"""The safetensors reader/writer (dyn/io/_safetensors.py): round trips, strict
header validation, and atomic replacement."""

import json
import os
import struct

import numpy as np
import pytest

from dyn.io import _safetensors as st
from dyn.io._safetensors import ModelFileError


def test_round_trip_of_every_dtype_and_shape(tmp_path):
    tensors = {
        "f64": np.arange(6.0).reshape(2, 3),
        "f32": np.arange(24, dtype=np.float32).reshape(2, 3, 4),
        "f16": np.array([0.5, -2.0], np.float16),
        "i64": np.array(7, np.int64),  # 0-d
        "i8": np.array([-1, 2], np.int8),
        "u8": np.arange(3, dtype=np.uint8),
        "bool": np.array([True, False]),
        "empty": np.zeros((0, 3), np.float32),
        "big_endian": np.arange(4, dtype=">f4"),
        "strided": np.arange(20.0).reshape(4, 5)[:, ::2],
    }
    st.write(tmp_path / "t.st", tensors.items(), {"note": "hello", "unicode": "ünï"})
    got, meta = st.read(tmp_path / "t.st")
    assert meta == {"note": "hello", "unicode": "ünï"} and list(got) == list(tensors)
    for k, v in tensors.items():
        assert got[k].shape == v.shape and got[k].dtype == v.dtype.newbyteorder("=")
        np.testing.assert_array_equal(got[k], v)
    raw = (tmp_path / "t.st").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert (8 + n) % 8 == 0 and raw[8:9] == b"{"  # data 8-byte aligned, as the reference writer does


def test_lazy_tensors_and_bad_input(tmp_path):
    calls = []
    st.write(tmp_path / "t.st", [("a", (2, 2), np.float32, lambda: calls.append(1) or np.eye(2))])
    assert calls == [1] and np.array_equal(st.read(tmp_path / "t.st")[0]["a"], np.eye(2))
    with pytest.raises(ValueError, match="repeated"):
        st.write(tmp_path / "t.st", [("a", np.ones(1)), ("a", np.ones(1))])
    with pytest.raises(TypeError, match="dtype complex128"):
        st.write(tmp_path / "t.st", [("a", np.ones(1, complex))])
    with pytest.raises(TypeError, match="metadata"):
        st.write(tmp_path / "t.st", [], {"a": 1})


def test_bf16_is_read_as_float32(tmp_path):
    x = np.array([1.0, -2.5, 3.140625], np.float32)
    bf16 = (x.view(np.uint32) >> 16).astype("<u2")
    header = json.dumps({"x": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 6]}}).encode()
    (tmp_path / "b.st").write_bytes(struct.pack("<Q", len(header)) + header + bf16.tobytes())
    got = st.read(tmp_path / "b.st")[0]["x"]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, x)


def _file(tmp_path, header, data=b"", raw_header=None):
    h = raw_header if raw_header is not None else json.dumps(header).encode()
    path = tmp_path / "bad.st"
    path.write_bytes(struct.pack("<Q", len(h)) + h + data)
    return path


def _t(dtype="F32", shape=(2,), offsets=(0, 8)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


@pytest.mark.parametrize(
    "header, data, raw, message",
    [
        (None, b"", b"[1, 2]", "not a JSON object"),
        (None, b"", b"{not json", "not valid JSON"),
        (None, b"", b"\xff\xfe{}", "not valid JSON"),
        (None, b"", b'{"a": 1, "a": 2}', "duplicate key"),
        ({"__metadata__": {"k": 1}}, b"", None, "__metadata__ must map strings to strings"),
        ({"__metadata__": ["x"]}, b"", None, "__metadata__ must map strings to strings"),
        ({"a": _t(dtype="F128")}, bytes(8), None, "unknown dtype 'F128'"),
        ({"a": _t(shape=(-2,))}, bytes(8), None, "bad shape"),
        ({"a": _t(shape=(2.0,))}, bytes(8), None, "bad shape"),
        ({"a": _t(shape=[1] * 65)}, bytes(8), None, "bad shape"),
        ({"a": {"dtype": "F32", "shape": [2]}}, bytes(8), None, "exactly dtype, shape and data_offsets"),
        ({"a": dict(_t(), extra=1)}, bytes(8), None, "exactly dtype, shape and data_offsets"),
        ({"a": _t(offsets=(0, 8, 9))}, bytes(8), None, "data_offsets must be two integers"),
        ({"a": _t(offsets=(True, 8))}, bytes(8), None, "data_offsets must be two integers"),
        ({"a": _t(offsets=(0, 16), shape=(4,))}, bytes(8), None, r"out of range \(the data part holds 8"),
        ({"a": _t(offsets=(8, 0))}, bytes(8), None, "out of range"),
        ({"a": _t(offsets=(0, 4))}, bytes(8), None, "needs 8 bytes, data_offsets give 4"),
        ({"a": _t(), "b": _t(offsets=(4, 12))}, bytes(12), None, "overlaps the tensor before it"),
        ({"a": _t(), "b": _t(offsets=(12, 20))}, bytes(20), None, "leaves a gap of 4 bytes"),
        ({"a": _t()}, bytes(12), None, "4 bytes after the last tensor belong to no tensor"),
    ],
)
def test_malformed_headers_are_rejected(tmp_path, header, data, raw, message):
    path = _file(tmp_path, header, data, raw)
    with pytest.raises(ModelFileError, match=message) as err:
        st.SafeTensorsFile(path)
    assert str(path) in str(err.value)


def test_deeply_nested_header_is_rejected(tmp_path):
    with pytest.raises(ModelFileError, match="not valid JSON"):
        st.SafeTensorsFile(_file(tmp_path, None, raw_header=b"[" * 100000 + b"]" * 100000))


def test_bad_lengths_are_rejected_before_reading(tmp_path):
    (tmp_path / "short.st").write_bytes(b"\x01\x00")
    with pytest.raises(ModelFileError, match="too short"):
        st.SafeTensorsFile(tmp_path / "short.st")
    (tmp_path / "long.st").write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    with pytest.raises(ModelFileError, match="exceeds the limit"):
        st.SafeTensorsFile(tmp_path / "long.st")
    (tmp_path / "past.st").write_bytes(struct.pack("<Q", 100) + b"{}")
    with pytest.raises(ModelFileError, match="runs past the end of the file"):
        st.SafeTensorsFile(tmp_path / "past.st")


def test_atomic_write_leaves_old_file_on_error_and_keeps_its_mode(tmp_path):
    path = tmp_path / "m.st"
    st.write(path, [("a", np.ones(3))])
    os.chmod(path, 0o640)

    def failing():
        raise OSError("disk full (simulated)")

    with pytest.raises(OSError, match="disk full"):
        st.write(path, [("a", np.zeros(3)), ("b", (2,), np.float64, failing)])
    np.testing.assert_array_equal(st.read(path)[0]["a"], np.ones(3))
    assert os.listdir(tmp_path) == ["m.st"]  # the temporary file was removed
    st.write(path, [("a", np.zeros(3))])
    assert os.stat(path).st_mode & 0o777 == 0o640
    # through a symlink, the target is replaced and the link kept
    os.symlink(path, tmp_path / "link.st")
    st.write(tmp_path / "link.st", [("a", np.full(3, 2.0))])
    assert os.path.islink(tmp_path / "link.st")
    np.testing.assert_array_equal(st.read(path)[0]["a"], np.full(3, 2.0))


def test_matches_the_reference_implementation(tmp_path):
    """Files are interchangeable with the safetensors package (when installed)."""
    ref = pytest.importorskip("safetensors.numpy", reason="the safetensors package is not installed")
    a = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "i": np.array([1, 2], np.int64)}
    st.write(tmp_path / "ours.st", a.items(), {"k": "v"})
    got = ref.load_file(str(tmp_path / "ours.st"))
    assert all(np.array_equal(got[k], a[k]) for k in a)
    ref.save_file(a, str(tmp_path / "theirs.st"), metadata={"k": "v"})
    got, meta = st.read(tmp_path / "theirs.st")
    assert meta == {"k": "v"} and all(np.array_equal(got[k], a[k]) for k in a)
