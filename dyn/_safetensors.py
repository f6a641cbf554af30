"""The safetensors file format, written and read with numpy alone, and atomic writes.

A file is: an 8-byte little-endian header length n, n bytes of UTF-8 JSON
(padded with spaces so the data starts 8-byte aligned), then the raw
little-endian bytes of every tensor. The header maps each tensor name to
{"dtype", "shape", "data_offsets": [begin, end]} (offsets into the data part)
and may hold "__metadata__", a dict of strings. Nothing in a file is ever
executed: loading an untrusted file can only fail, with a ModelFileError that
names the file and what is wrong.

Writes go to a temporary file in the target's directory, are flushed and
fsynced, then renamed over the target (and the directory fsynced): a process
killed mid-save leaves the previous file whole.
"""

from __future__ import annotations

import json
import os
import struct
import tempfile

import numpy as np

MAX_HEADER_BYTES = 100_000_000  # the safetensors reference limit
MAX_TENSORS = 1_000_000
MAX_NDIM = 64
CHUNK_BYTES = 1 << 24  # written in pieces so a large tensor needs no second copy

# safetensors dtype code -> little-endian numpy dtype (BF16 is read as uint16, then widened)
DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2",
    "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
    "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?",
}  # fmt: skip
_CODES = {np.dtype(v).newbyteorder("="): k for k, v in DTYPES.items() if k != "BF16"}

# Test hook: called after every chunk written (tests make a save slow or kill it mid-write).
_after_chunk = None


class ModelFileError(ValueError, RuntimeError):
    """A model file is malformed, or does not fit what it is loaded into.

    A ValueError (bad input) that is also a RuntimeError, which is what DyNet
    raises for the same problems, so code written for either catches it.
    """


def dtype_code(dtype) -> str:
    dt = np.dtype(dtype)
    code = _CODES.get(dt.newbyteorder("="))
    if code is None:
        raise TypeError("safetensors cannot store arrays of dtype %s" % dt)
    return code


# ---------------------------------------------------------------- writing


def atomic_write(path, write) -> None:
    """Create or replace ``path`` with what ``write(f)`` writes to a binary file,
    all or nothing: a crash at any point leaves either the old file or the new one."""
    path = os.path.realpath(os.fspath(path))  # replace a symlink's target, not the link
    directory, base = os.path.split(path)
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix="." + base + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_directory(directory)


def _fsync_directory(directory):
    """Make the rename itself durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_bytes(f, data):
    view = memoryview(data.reshape(-1).view(np.uint8))
    for start in range(0, len(view), CHUNK_BYTES):
        f.write(view[start : start + CHUNK_BYTES])
        if _after_chunk is not None:
            _after_chunk()


def write(path, tensors, metadata=None) -> None:
    """Atomically write ``tensors`` (an iterable of (name, array) pairs, or of
    (name, shape, dtype, get) where ``get()`` returns the array only when it is
    written) and ``metadata`` (a dict of strings) as a safetensors file.

    Tensors are stored in the order given, C-ordered, little-endian.
    """
    specs, offset, seen = [], 0, set()
    for item in tensors:
        if len(item) == 2:
            name, arr = item
            arr = np.asarray(arr)
            shape, dtype, get = arr.shape, arr.dtype, (lambda a=arr: a)
        else:
            name, shape, dtype, get = item
        if not isinstance(name, str) or name == "__metadata__" or name in seen:
            raise ValueError("safetensors: bad or repeated tensor name %r" % (name,))
        seen.add(name)
        code = dtype_code(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(DTYPES[code]).itemsize
        specs.append((name, code, tuple(int(d) for d in shape), offset, offset + nbytes, get))
        offset += nbytes
    metadata = dict(metadata or {})
    for k, v in metadata.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError("safetensors metadata must map strings to strings, got %r: %r" % (k, v))
    header = {"__metadata__": metadata} if metadata else {}
    for name, code, shape, begin, end, _ in specs:
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [begin, end]}
    raw = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    raw += b" " * (-len(raw) % 8)

    def _write(f):
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for name, code, shape, _, _, get in specs:
            arr = np.asarray(get(), dtype=DTYPES[code], order="C")
            if arr.shape != shape:
                raise ValueError("safetensors: tensor %s changed shape while being saved" % name)
            _write_bytes(f, arr)

    atomic_write(path, _write)


# ---------------------------------------------------------------- reading


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError("duplicate key %r" % k)
        out[k] = v
    return out


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


class SafeTensorsFile:
    """A validated safetensors header; ``read(name)`` reads one tensor.

    Attributes:
        path: the file.
        metadata: the "__metadata__" dict (strings), {} if none.
        tensors: name -> (dtype code, shape tuple, begin, end), in data order.
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        with open(self.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) < 8:
                raise self._error("file of %d bytes is too short for a safetensors header" % size)
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES:
                raise self._error("header length %d exceeds the limit of %d bytes" % (n, MAX_HEADER_BYTES))
            if n > size - 8:
                raise self._error("header length %d runs past the end of the file (%d bytes)" % (n, size))
            raw = f.read(n)
        self._data_start = 8 + n
        self._parse(raw, size - 8 - n)

    def _error(self, msg):
        return ModelFileError("%s: %s" % (self.path, msg))

    def _parse(self, raw, data_len):
        try:
            header = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates)
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            raise self._error("the header is not valid JSON (%s)" % e) from None
        if not isinstance(header, dict):
            raise self._error("the header is not a JSON object")
        meta = header.pop("__metadata__", {})
        if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
            raise self._error("__metadata__ must map strings to strings")
        self.metadata = meta
        if len(header) > MAX_TENSORS:
            raise self._error("%d tensors exceed the limit of %d" % (len(header), MAX_TENSORS))
        spans = []
        for name, info in header.items():
            spans.append(self._check_tensor(name, info, data_len))
        spans.sort(key=lambda s: (s[3], s[4]))
        at = 0
        for name, _, _, begin, end in spans:
            if begin != at:
                what = (
                    "overlaps the tensor before it"
                    if begin < at
                    else "leaves a gap of %d bytes" % (begin - at)
                )
                raise self._error("tensor %r at bytes [%d, %d) %s" % (name, begin, end, what))
            at = end
        if at != data_len:
            raise self._error("%d bytes after the last tensor belong to no tensor" % (data_len - at))
        self.tensors = {s[0]: s[1:] for s in spans}

    def _check_tensor(self, name, info, data_len):
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise self._error("tensor %r: entry must have exactly dtype, shape and data_offsets" % name)
        code, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if code not in DTYPES:
            raise self._error("tensor %r: unknown dtype %r" % (name, code))
        if (
            not isinstance(shape, list)
            or len(shape) > MAX_NDIM
            or not all(_is_int(d) and d >= 0 for d in shape)
        ):
            raise self._error("tensor %r: bad shape %r" % (name, shape))
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(o) for o in offsets)):
            raise self._error("tensor %r: data_offsets must be two integers, got %r" % (name, offsets))
        begin, end = offsets
        if not 0 <= begin <= end <= data_len:
            raise self._error(
                "tensor %r: data_offsets [%d, %d] out of range (the data part holds %d bytes)"
                % (name, begin, end, data_len)
            )
        count = 1
        for d in shape:
            count *= d
        if count * np.dtype(DTYPES[code]).itemsize != end - begin:
            raise self._error(
                "tensor %r: %s of shape %s needs %d bytes, data_offsets give %d"
                % (name, code, shape, count * np.dtype(DTYPES[code]).itemsize, end - begin)
            )
        return name, code, tuple(shape), begin, end

    def read(self, name, f=None):
        """The tensor ``name`` as a native-endian numpy array (BF16 widened to float32)."""
        code, shape, begin, end = self.tensors[name]
        if f is None:
            with open(self.path, "rb") as f:
                return self.read(name, f)
        f.seek(self._data_start + begin)
        buf = bytearray(end - begin)
        if f.readinto(buf) != len(buf):
            raise self._error("tensor %r is cut short: the file changed while being read" % name)
        arr = np.frombuffer(buf, dtype=DTYPES[code])
        if code == "BF16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        return arr.astype(arr.dtype.newbyteorder("="), copy=False).reshape(shape)

    def read_all(self):
        with open(self.path, "rb") as f:
            return {name: self.read(name, f) for name in self.tensors}


def read(path):
    """(tensors dict name -> array, metadata dict) of a safetensors file."""
    sf = SafeTensorsFile(path)
    return sf.read_all(), sf.metadata
