"""DyNet's text model format, read and written.

Per (lookup) parameter a header line, then one line of values (column-major
over the DyNet dim, ``%+.8e``), then a gradient line if the header says
FULL_GRAD:

    #Parameter# /W {3,4} 193 ZERO_GRAD
    +1.00000000e+00 -2.50000000e-01 ...
    #LookupParameter# /E {2,5} 161 FULL_GRAD       (lookup dim: rows last)

The byte count covers the value (and gradient) lines; DyNet skips entries by
it, so it is written exactly. Reading goes by lines and checks every count.
"""

from __future__ import annotations

import math
import os
import re

import numpy as np

from dyn.io._safetensors import ModelFileError, atomic_write, remove_stale_temps

# "#Parameter# <name> {d0,d1,...}[X<batch>] <byte count> [ZERO_GRAD|FULL_GRAD]"
_HEADER = re.compile(
    r"^#(Parameter|LookupParameter)# (\S+) \{([0-9]+(?:,[0-9]+)*)\}(?:X([0-9]+))? ([0-9]+)"
    r"(?: (ZERO_GRAD|FULL_GRAD))?\s*$"
)


def looks_like_text(head: bytes) -> bool:
    """Whether a file starting with these bytes is in DyNet's text format
    (an empty file is: DyNet writes one for an empty collection)."""
    return head[:1] == b"#" or not head.strip()


def _floats(line, count, path, lineno, what):
    try:
        vals = np.array(line.split(), dtype=np.float64)
    except ValueError as e:
        raise ModelFileError("%s: line %d: bad number in the %s (%s)" % (path, lineno, what, e)) from None
    if vals.size != count:
        raise ModelFileError(
            "%s: line %d: %d numbers for the %s, expected %d" % (path, lineno, vals.size, what, count)
        )
    return vals


def read(path):
    """[(kind, name, dim, values, grads or None)] in file order; kind is
    "parameter" or "lookup", values flat float64 in column-major order."""
    try:
        with open(path, encoding="utf-8") as f:
            remove_stale_temps(os.path.dirname(os.path.realpath(path)))
            lines = f.read().split("\n")
    except UnicodeDecodeError as e:
        raise ModelFileError("%s: not a text model file (%s)" % (path, e)) from None
    out, i = [], 0
    while i < len(lines):
        line, i = lines[i].rstrip("\r"), i + 1
        if not line.strip():
            continue
        m = _HEADER.match(line)
        if m is None:
            raise ModelFileError(
                "%s: line %d: expected a '#Parameter#' or '#LookupParameter#' header, got %r"
                % (path, i, line[:80])
            )
        kind = "parameter" if m.group(1) == "Parameter" else "lookup"
        name, digits = m.group(2), m.group(3).split(",")
        dim = tuple(int(d) for d in digits if len(d) <= 18)  # a longer one cannot fit a line
        if (
            len(dim) != len(digits)
            or m.group(4) not in (None, "1")
            or 0 in dim
            or (kind == "lookup" and len(dim) < 2)
        ):
            raise ModelFileError("%s: line %d: bad dim for %s: %s" % (path, i, name, line.split()[2][:80]))
        size = math.prod(dim)  # exact: no int64 wrap-around to a small count
        if i >= len(lines):
            raise ModelFileError("%s: the file ends before the values of %s" % (path, name))
        values, i = _floats(lines[i], size, path, i + 1, "values of " + name), i + 1
        grads = None
        if m.group(6) == "FULL_GRAD":
            if i >= len(lines):
                raise ModelFileError("%s: the file ends before the gradient of %s" % (path, name))
            grads, i = _floats(lines[i], size, path, i + 1, "gradient of " + name), i + 1
        out.append((kind, name, dim, values, grads))
    return out


def _line(flat):
    return (" ".join("%+.8e" % x for x in np.asarray(flat, dtype=np.float64).tolist()) + "\n").encode()


def write(path, records):
    """Atomically write [(kind, name, dim, get_values, get_grads or None)]; the
    getters return flat column-major arrays when their entry is written."""

    def _write(f):
        for kind, name, dim, get_values, get_grads in records:
            body = _line(get_values())
            if get_grads is not None:
                body += _line(get_grads())
            tag = "Parameter" if kind == "parameter" else "LookupParameter"
            grad = "FULL_GRAD" if get_grads is not None else "ZERO_GRAD"
            header = "#%s# %s {%s} %d %s\n" % (tag, name, ",".join(str(d) for d in dim), len(body), grad)
            f.write(header.encode() + body)

    atomic_write(path, _write)
