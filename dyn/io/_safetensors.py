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
killed mid-save leaves the previous file whole. The temporary file is locked
while it is written; one whose writer died (its lock is gone) is removed by
the next save or load in that directory (remove_stale_temps).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import reprlib
import signal
import stat
import struct
import tempfile
import threading

import numpy as np

try:
    import fcntl
except ImportError:  # not POSIX: no lock, no clean-up of others' temporary files
    fcntl = None

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


MAX_DEPTH = 100  # nesting of the plain values a file may hold (specs, records)
MAX_VALUES = 1_000_000  # how many values, shared ones counted each time they are used
_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 3, 80, 80


def short_repr(x) -> str:
    """repr for error messages about file contents: short, whatever the nesting."""
    return _SHORT.repr(x)


def check_plain(value, where, max_values=MAX_VALUES):
    """Raise ModelFileError (message prefixed by ``where``) if a value read from
    a file is nested deeper than MAX_DEPTH or holds more than ``max_values``
    values (counting a shared or self-containing one each time it is
    reached), so that walking it later cannot recurse too deep or run
    forever. Parsed JSON shares nothing (it is no larger than its text): give
    max_values=None."""
    containers = (list, tuple, dict)
    if not isinstance(value, (list, tuple, dict)):
        return
    stack, count = [(value, 0)], 1
    while stack:
        x, depth = stack.pop()
        if depth >= MAX_DEPTH:
            raise ModelFileError("%s: values nested deeper than %d levels" % (where, MAX_DEPTH))
        items = [v for kv in x.items() for v in kv] if isinstance(x, dict) else x
        count += len(items)
        if max_values is not None and count > max_values:
            raise ModelFileError("%s: holds more than %d values" % (where, max_values))
        stack.extend((v, depth + 1) for v in items if isinstance(v, containers))


def dtype_code(dtype) -> str:
    dt = np.dtype(dtype)
    code = _CODES.get(dt.newbyteorder("="))
    if code is None:
        raise TypeError("safetensors cannot store arrays of dtype %s" % dt)
    return code


# ---------------------------------------------------------------- writing


def temp_name_pattern():
    """The regular expression every temporary file of a dyn save matches:
    ``.<target name>.dyn-<pid>-<8 random characters>.tmp`` (the target name cut
    to 50 characters)."""
    return _TEMP_NAME


_TEMP_NAME = re.compile(r"^\..+\.dyn-[0-9]+-[a-z0-9_]{8}\.tmp$", re.DOTALL)
_BASE_CHARS = 50  # a long target name still leaves the temporary name under NAME_MAX


def remove_stale_temps(directory) -> list:
    """Remove the temporary files that dyn saves killed in ``directory`` left.

    A save holds an exclusive lock (flock) on its temporary file until it is
    renamed over the target, and the kernel drops the lock when the process
    dies, however it dies. So a file of dyn's naming (``temp_name_pattern``)
    that can be locked has no live writer: it is removed. A save in progress,
    in this process or any other, keeps its lock and is never touched. Files
    of other names, other users' files and anything that cannot be opened are
    left alone; where file locks are not available nothing is removed. Never
    raises: returns the names removed.
    """
    if fcntl is None:
        return []
    removed = []
    try:
        with os.scandir(directory or ".") as entries:
            for entry in entries:
                if _TEMP_NAME.match(entry.name) and _remove_if_abandoned(entry):
                    removed.append(entry.name)
    except OSError:
        pass
    return removed


def _remove_if_abandoned(entry):
    try:
        if not entry.is_file(follow_symlinks=False):
            return False
        flags = os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(entry.path, os.O_RDWR | flags)
        except PermissionError:  # a temp chmod-ed read-only just before its rename
            fd = os.open(entry.path, os.O_RDONLY | flags)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return False
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # fails while a live save holds it
        now = os.stat(entry.path, follow_symlinks=False)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            return False  # the name now belongs to another file
        os.unlink(entry.path)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _locked_temp(directory, base):
    """A new temporary file next to the target, locked by this process (see
    remove_stale_temps): (fd, path)."""
    prefix = ".%s.dyn-%d-" % (base[:_BASE_CHARS], os.getpid())
    for _ in range(100):
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=directory)
        if fcntl is None:
            return fd, tmp
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # waits only while a cleaner looks at it
            except OSError:
                return fd, tmp  # no locks here: cleaners cannot lock it either
            now, st = os.stat(tmp, follow_symlinks=False), os.fstat(fd)
            if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                return fd, tmp
        except FileNotFoundError:
            pass  # a cleaner took it for abandoned between mkstemp and flock: make another
        except BaseException:
            os.close(fd)
            _unlink_quietly(tmp)
            raise
        os.close(fd)
    raise FileExistsError(errno.EEXIST, "could not create a temporary file", directory)


def _unlink_quietly(path):
    try:
        os.unlink(path)
    except OSError:
        pass


@contextlib.contextmanager
def _removed_on_termination(tmp):
    """While a save runs in the main thread, SIGTERM and SIGHUP (if they still
    have their default action, which kills the process without running any
    cleanup) first remove the temporary file, then kill the process as
    before. Handlers the program set are left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    installed = []

    def handler(signum, frame):
        _unlink_quietly(tmp)
        for s, _ in installed:
            signal.signal(s, signal.SIG_DFL)
        os.kill(os.getpid(), signum)  # dies of the signal, as without dyn

    for name in ("SIGTERM", "SIGHUP"):
        s = getattr(signal, name, None)
        try:
            if s is not None and signal.getsignal(s) == signal.SIG_DFL:
                signal.signal(s, handler)
                installed.append((s, handler))
        except (ValueError, OSError):  # not the main interpreter: leave signals alone
            pass
    try:
        yield
    finally:
        for s, h in installed:
            if signal.getsignal(s) is h:
                signal.signal(s, signal.SIG_DFL)


def _save_error(e, target):
    """An OSError of a save, with its errno and subclass, naming the target file."""
    if e.errno is None:
        return e
    msg = "%s (nothing saved; any previous file is unchanged)" % (e.strerror or e)
    try:
        err = type(e)(e.errno, msg, target)
    except Exception:
        err = OSError(e.errno, msg, target)
    return err if isinstance(err, type(e)) else e


def atomic_write(path, write) -> None:
    """Create or replace ``path`` with what ``write(f)`` writes to a binary file,
    all or nothing: a crash at any point leaves either the old file or the new one.

    The temporary file is removed on every exit Python sees (an exception,
    KeyboardInterrupt, SIGTERM/SIGHUP left at their default); one left by a
    killed process is removed by the next save or load in its directory
    (remove_stale_temps). An OSError (disk full, file too large, no
    permission) keeps its errno and names ``path``.
    """
    target = os.fspath(path)
    path = os.path.realpath(target)  # replace a symlink's target, not the link
    directory, base = os.path.split(path)
    remove_stale_temps(directory)
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    except OSError as e:
        raise _save_error(e, target) from e
    try:
        fd, tmp = _locked_temp(directory, base)
    except OSError as e:
        raise _save_error(e, target) from e
    f = os.fdopen(fd, "wb")
    try:
        with _removed_on_termination(tmp):
            write(f)
            f.flush()
            os.fsync(fd)
            os.fchmod(fd, mode) if hasattr(os, "fchmod") else os.chmod(tmp, mode)
            os.replace(tmp, path)  # before closing: the lock keeps cleaners off until the end
    except BaseException as e:
        _close_quietly(f)
        _unlink_quietly(tmp)
        if isinstance(e, OSError):
            raise _save_error(e, target) from e
        raise
    _close_quietly(f)  # written, synced and renamed: nothing left to fail
    _fsync_directory(directory)


def _close_quietly(f):
    try:
        f.close()
    except OSError:  # a write the buffer still held fails again here: already reported
        pass


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
            remove_stale_temps(os.path.dirname(os.path.realpath(self.path)))
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
        if not isinstance(code, str) or code not in DTYPES:
            raise self._error("tensor %r: unknown dtype %s" % (name, short_repr(code)))
        if (
            not isinstance(shape, list)
            or len(shape) > MAX_NDIM
            or not all(_is_int(d) and d >= 0 for d in shape)
        ):
            raise self._error("tensor %r: bad shape %s" % (name, short_repr(shape)))
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(o) for o in offsets)):
            raise self._error(
                "tensor %r: data_offsets must be two integers, got %s" % (name, short_repr(offsets))
            )
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
