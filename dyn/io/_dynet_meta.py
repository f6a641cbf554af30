"""DyNet's ``basename.meta`` files (written by its dy.save), read without unpickling.

DyNet writes one pickle per saved object: ``("Parameters", name)``,
``("LookupParameters", name)`` or ``(builder class, spec, collection name)``.
Unpickling an untrusted file can run any code, so dyn never does. This reads
the pickle opcodes as data (``pickletools.genops`` only parses) and accepts
the opcodes of plain values alone: tuples, lists, dicts, strings, numbers,
booleans, None, and references to classes, which are kept as ClassRef(module,
name) and never imported. Anything else (object construction, calls) is
refused with a ModelFileError.
"""

from __future__ import annotations

import io
import pickletools
from typing import NamedTuple

from dyn.io._safetensors import ModelFileError, check_plain, short_repr

MAX_BYTES = 16_000_000
MAX_VALUES = 100_000  # per record, shared values counted each time: DyNet's specs hold a few


class ClassRef(NamedTuple):
    """A class named in the file (not imported)."""

    module: str
    name: str


_VALUE_OPS = {
    "NONE", "NEWTRUE", "NEWFALSE", "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4",
    "FLOAT", "BINFLOAT", "UNICODE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "STRING",
    "BINSTRING", "SHORT_BINSTRING", "SHORT_BINBYTES", "BINBYTES", "BINBYTES8",
}  # fmt: skip
_IGNORED_OPS = {"PROTO", "FRAME"}


def _pop_mark(stack, marks):
    at = marks.pop()
    items = stack[at:]
    del stack[at:]
    return items


def _one_pickle(f, path):
    """The value of the next pickle in f, interpreted as plain data."""
    stack, marks, memo = [], [], {}
    for op, arg, pos in pickletools.genops(f):
        name = op.name
        if name in _VALUE_OPS:
            stack.append(arg)
        elif name in _IGNORED_OPS:
            pass
        elif name == "MARK":
            marks.append(len(stack))
        elif name == "STOP":
            if len(stack) != 1:
                raise ModelFileError("%s: malformed pickle (stack of %d at its end)" % (path, len(stack)))
            return stack[0]
        elif name in ("EMPTY_TUPLE", "TUPLE1", "TUPLE2", "TUPLE3"):
            k = {"EMPTY_TUPLE": 0, "TUPLE1": 1, "TUPLE2": 2, "TUPLE3": 3}[name]
            items = stack[len(stack) - k :] if k else []
            del stack[len(stack) - k :]
            stack.append(tuple(items))
        elif name == "TUPLE":
            stack.append(tuple(_pop_mark(stack, marks)))
        elif name in ("EMPTY_LIST", "LIST"):
            stack.append([] if name == "EMPTY_LIST" else _pop_mark(stack, marks))
        elif name in ("APPEND", "APPENDS"):
            items = [stack.pop()] if name == "APPEND" else _pop_mark(stack, marks)
            stack[-1].extend(items)
        elif name in ("EMPTY_DICT", "DICT"):
            items = [] if name == "EMPTY_DICT" else _pop_mark(stack, marks)
            stack.append(dict(zip(items[::2], items[1::2])))
        elif name in ("SETITEM", "SETITEMS"):
            items = stack[-2:] if name == "SETITEM" else _pop_mark(stack, marks)
            if name == "SETITEM":
                del stack[-2:]
            stack[-1].update(zip(items[::2], items[1::2]))
        elif name == "MEMOIZE":
            memo[len(memo)] = stack[-1]
        elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo[arg] = stack[-1]
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            stack.append(memo[arg])
        elif name == "GLOBAL":
            module, _, cls = arg.partition(" ")
            stack.append(ClassRef(module, cls))
        elif name == "STACK_GLOBAL":
            cls, module = stack.pop(), stack.pop()
            stack.append(ClassRef(module, cls))
        else:
            raise ModelFileError(
                "%s: byte %d: pickle opcode %s is not plain data; dyn does not run code from model files"
                % (path, pos, name)
            )
    raise ModelFileError("%s: pickle without STOP" % path)


def read(path):
    """The records of a DyNet .meta file, in order: ("Parameters", name),
    ("LookupParameters", name) or (ClassRef, spec, collection name)."""
    with open(path, "rb") as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ModelFileError("%s: larger than %d bytes" % (path, MAX_BYTES))
    f, records = io.BytesIO(data), []
    while f.tell() < len(data):
        try:
            rec = _one_pickle(f, path)
        except ModelFileError:
            raise
        except Exception as e:  # any parse failure of hostile bytes: nothing of the file ran
            raise ModelFileError("%s: malformed pickle (%s)" % (path, short_repr(e))) from None
        check_plain(rec, "%s: object %d" % (path, len(records)), max_values=MAX_VALUES)
        simple = isinstance(rec, tuple) and len(rec) == 2 and rec[0] in ("Parameters", "LookupParameters")
        builder = isinstance(rec, tuple) and len(rec) == 3 and isinstance(rec[0], ClassRef)
        if not (simple or builder) or not isinstance(rec[-1], str):
            raise ModelFileError(
                "%s: object %d is not a record DyNet's dy.save writes: %s"
                % (path, len(records), short_repr(rec))
            )
        records.append(rec)
    return records
