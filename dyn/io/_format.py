"""dyn's model file format: how parameters become tensors, and the header.

Model files are safetensors (dyn/io/_safetensors.py): loading one runs no code.
Each (lookup) parameter is one tensor named by its full DyNet name ("/W",
"/lstm/_0") holding exactly what ``as_array()`` returns (shape ``shape()``,
lookup tables (N, d...)), so any safetensors reader sees the natural arrays.
The header's "__metadata__" holds, as JSON strings:

    format "dyn", format_version "1"
    entries      [{"name", "kind": "parameter"|"lookup", "dim": DyNet dim,
                   "tensor": key, "grad": key (only if gradients were saved)}]
                 in save order (populate assigns by position, as DyNet does)
    collections  the names of the collections the entries belong to
    objects      (dy.save only) what was saved: see dyn/io/_objects.py

ModelFile reads any model file into validated entries: dyn's safetensors,
any other safetensors file (tensors known by name and shape only), or
DyNet's text format (dyn/io/_dynet_text.py), detected from the first bytes.
write_model writes entries in either format, atomically.

This module works on parameters only through their own methods (value_view,
grad_view, dyn_dim, is_lookup): it imports nothing of dyn.params.
"""

from __future__ import annotations

import json
import os

import numpy as np

from dyn.io import _dynet_text
from dyn.io import _safetensors as st
from dyn.io._safetensors import ModelFileError

FORMAT_VERSION = "1"
_KINDS = ("parameter", "lookup")
_FLOAT_CODES = ("F64", "F32", "F16", "BF16")


# ---------------------------------------------------------------- layouts


def view_shape(kind, dim):
    """The shape as_array() gives: a lookup's DyNet dim (d..., N) reads as (N, d...)."""
    return (dim[-1],) + tuple(dim[:-1]) if kind == "lookup" else tuple(dim)


def to_view(flat, kind, dim):
    """Pool layout (column-major over the DyNet dim) -> the as_array() array."""
    if kind == "lookup":
        k = len(dim) - 1
        return flat.reshape((dim[-1],) + tuple(dim[:-1])[::-1]).transpose((0,) + tuple(range(k, 0, -1)))
    return flat.reshape(dim, order="F")


def from_view(arr, kind):
    """The inverse of to_view: a flat array in pool layout."""
    if kind == "lookup":
        return arr.transpose((0,) + tuple(range(arr.ndim - 1, 0, -1))).reshape(-1)
    return arr.reshape(-1, order="F")


def kind_of(p):
    return "lookup" if p.is_lookup else "parameter"


class Entry:
    """One saved (lookup) parameter: its DyNet name, kind and dim, and how to
    get its values (and gradient) as flat arrays in pool layout. kind is None
    for a tensor of a safetensors file dyn did not write: dim is then its shape."""

    __slots__ = ("name", "kind", "dim", "dtype", "get", "get_grad")

    def __init__(self, name, kind, dim, dtype, get, get_grad=None):
        self.name, self.kind, self.dim, self.dtype = name, kind, tuple(dim), np.dtype(dtype)
        self.get, self.get_grad = get, get_grad or None

    @property
    def shape(self):
        return self.dim if self.kind is None else view_shape(self.kind, self.dim)

    def values(self):
        return self.get(self.kind)

    def grads(self):
        return self.get_grad(self.kind)

    def describe(self):
        what = {"parameter": "parameter", "lookup": "lookup parameter", None: "tensor"}[self.kind]
        return "%s %s of %s %s" % (what, self.name, "shape" if self.kind is None else "dim", self.dim)

    def misfit(self, p):
        """Why this entry cannot be loaded into p (None if it can)."""
        if self.kind is None:
            ok = self.dim == tuple(p.shape())
        else:
            ok = self.kind == kind_of(p) and self.dim == tuple(p.dyn_dim())
        if ok:
            return None
        return "saved %s does not fit %s (dim %s)" % (self.describe(), p, tuple(p.dyn_dim()))


def constant(v):
    return lambda kind: v


def entry_of(name, p, gradients):
    """p's entry; its gradient too if gradients is true, or if it is None and the gradient is not
    all zeros (DyNet's FULL_GRAD / ZERO_GRAD: what populate then restores)."""
    kind, dim = kind_of(p), tuple(p.dyn_dim())
    if gradients is None:
        gradients = bool(np.any(p.grad_view() != 0))
    get_grad = (lambda kind: p.grad_view()) if gradients else None
    return Entry(name, kind, dim, p.pool.values.dtype, lambda kind: p.value_view(), get_grad)


# ---------------------------------------------------------------- reading files


class ModelFile:
    """The validated entries of a model file: dyn's safetensors, any other
    safetensors file (tensors known by name and shape only), or DyNet text."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self.objects = None
        with open(self.path, "rb") as f:
            head = f.read(9)
        # safetensors first: its 8 length bytes may begin with '#' (DyNet text has no '{' at byte 8)
        if len(head) == 9 and head[8:9] == b"{":
            self._read_safetensors(st.SafeTensorsFile(self.path))
        elif _dynet_text.looks_like_text(head):
            self.format = "dynet-text"
            self.entries = [
                Entry(name, kind, dim, np.float32, constant(v), g is not None and constant(g))
                for kind, name, dim, v, g in _dynet_text.read(self.path)
            ]
        else:
            raise self.error("neither a safetensors file nor a DyNet text model file")

    def error(self, msg):
        return ModelFileError("%s: %s" % (self.path, msg))

    def _read_safetensors(self, sf):
        meta = sf.metadata
        if meta.get("format") != "dyn":
            self.format = "safetensors"
            self.entries = [
                Entry(n, None, t[1], st.DTYPES[t[0]], lambda kind, n=n: from_view(sf.read(n), kind))
                for n, t in sf.tensors.items()
            ]
            return
        self.format = "dyn"
        if meta.get("format_version") != FORMAT_VERSION:
            raise self.error(
                "format version %r; this dyn reads %s" % (meta.get("format_version"), FORMAT_VERSION)
            )
        records = self._json(meta, "entries")
        if not isinstance(records, list):
            raise self.error("metadata 'entries' is not a list")
        self.entries = [self._entry(sf, i, r) for i, r in enumerate(records)]
        if "objects" in meta:
            self.objects = self._json(meta, "objects")

    def _json(self, meta, key):
        try:
            return json.loads(meta.get(key, "null"))
        except (ValueError, RecursionError) as e:
            raise self.error("metadata %r is not valid JSON (%s)" % (key, e)) from None

    def _entry(self, sf, i, r):
        if not (isinstance(r, dict) and {"name", "kind", "dim", "tensor"} <= set(r) <= {
            "name", "kind", "dim", "tensor", "grad"}):  # fmt: skip
            raise self.error("entry %d is malformed: %s" % (i, st.short_repr(r)))
        name, kind, dim = r["name"], r["kind"], r["dim"]
        if not isinstance(name, str) or kind not in _KINDS:
            raise self.error("entry %d: bad name or kind (%s)" % (i, st.short_repr((name, kind))))
        if not (isinstance(dim, list) and dim and all(type(d) is int and d > 0 for d in dim)):
            raise self.error("entry %d (%s): bad dim %s" % (i, name, st.short_repr(dim)))
        if kind == "lookup" and len(dim) < 2:
            raise self.error(
                "entry %d (%s): a lookup parameter's dim needs rows last, got %r" % (i, name, dim)
            )
        getters = []
        for key in ("tensor", "grad"):
            t = r.get(key)
            if t is None and key == "grad":
                getters.append(None)
                continue
            info = sf.tensors.get(t) if isinstance(t, str) else None
            if info is None:
                raise self.error("entry %d (%s): no tensor %s in the file" % (i, name, st.short_repr(t)))
            if info[0] not in _FLOAT_CODES or info[1] != view_shape(kind, dim):
                raise self.error(
                    "entry %d (%s): tensor %r is %s of shape %s; a %s of dim %s needs floats of shape %s"
                    % (i, name, t, info[0], info[1], kind, tuple(dim), view_shape(kind, dim))
                )
            getters.append(lambda kind, t=t: from_view(sf.read(t), kind))
        return Entry(name, kind, dim, st.DTYPES[sf.tensors[r["tensor"]][0]], *getters)

    def find(self, name, kind):
        for e in self.entries:
            if e.name == name and e.kind in (kind, None):
                return e
        other = [e for e in self.entries if e.name == name]
        if other:
            raise self.error("%s is saved as a %s, not a %s" % (name, other[0].kind, kind))
        some = ", ".join(e.name for e in self.entries[:8]) + (" ..." if len(self.entries) > 8 else "")
        raise self.error("no %s named %r (the file holds: %s)" % (kind, name, some or "nothing"))


# ---------------------------------------------------------------- writing files


def _collection_names(names):
    seen = {}
    for n in names:
        for k in range(len(n)):
            if n[k] == "/":
                seen.setdefault(n[: k + 1], None)
    return list(seen)


def _write_safetensors(path, entries, objects=None):
    keys, tensors, records = set(), [], []

    def unique(key):
        base, k = key, 1
        while key in keys:  # a name saved twice (DyNet allows it) gets a distinct tensor key
            key, k = "%s#%d" % (base, k), k + 1
        keys.add(key)
        return key

    for e in entries:
        rec = {"name": e.name, "kind": e.kind, "dim": list(e.dim), "tensor": unique(e.name)}
        tensors.append((rec["tensor"], e.shape, e.dtype, lambda e=e: to_view(e.values(), e.kind, e.dim)))
        if e.get_grad is not None:
            rec["grad"] = unique(e.name + "#grad")
            tensors.append((rec["grad"], e.shape, e.dtype, lambda e=e: to_view(e.grads(), e.kind, e.dim)))
        records.append(rec)
    meta = {
        "format": "dyn",
        "format_version": FORMAT_VERSION,
        "entries": json.dumps(records),
        "collections": json.dumps(_collection_names(e.name for e in entries)),
    }
    if objects is not None:
        meta["objects"] = json.dumps(objects)
    st.write(path, tensors, meta)


def write_model(path, items, append=False, gradients=None, format="safetensors", objects=None):
    """Write (saved name, parameter) items; with append, after the file's entries."""
    if format not in ("safetensors", "text"):
        raise ValueError("format must be 'safetensors' or 'text' (DyNet's text format), got %r" % (format,))
    entries = [entry_of(name, p, gradients) for name, p in items]
    if append and os.path.exists(path):
        old = ModelFile(path)
        if old.format == "safetensors":
            raise old.error("not a dyn model file: cannot append to it")
        entries = old.entries + entries
    if format == "text":
        _dynet_text.write(path, [(e.kind, e.name, e.dim, e.values, e.get_grad and e.grads) for e in entries])
    else:
        _write_safetensors(path, entries, objects)
