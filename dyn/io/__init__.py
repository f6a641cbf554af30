"""Saving and loading: parameters, collections, builders and trainer state.

Model files are safetensors (dyn/_safetensors.py): loading one runs no code.
Each (lookup) parameter is one tensor named by its full DyNet name ("/W",
"/lstm/_0") holding exactly what ``as_array()`` returns (shape ``shape()``,
lookup tables (N, d...)), so any safetensors reader sees the natural arrays.
The header's "__metadata__" holds, as JSON strings:

    format "dyn", format_version "1"
    entries      [{"name", "kind": "parameter"|"lookup", "dim": DyNet dim,
                   "tensor": key, "grad": key (only if gradients were saved)}]
                 in save order (populate assigns by position, as DyNet does)
    collections  the names of the collections the entries belong to
    objects      (dy.save only) what was saved: see ``save``

``populate`` also reads DyNet's text format (see
dyn/_dynet_text.py), detected from the file's first bytes, so models trained
with DyNet can be brought over; ``dy.load`` also reads DyNet's dy.save files.
Every load validates the whole file and checks names, kinds, dims and counts
before it writes anything; on any problem it raises ModelFileError (a
ValueError and a RuntimeError) naming the file and what is wrong. Every save
is atomic: a crash leaves the previous file whole.

Example:
    m = dy.ParameterCollection()
    W = m.add_parameters((3, 4), name="W")
    m.save("model.st")
    m.populate("model.st")              # same values back
    dy.save("run", [W, lstm])           # run.data (+ run.meta, a readable copy)
    W2, lstm2 = dy.load("run", dy.ParameterCollection())
"""

from __future__ import annotations

import json
import os
import re

import numpy as np

from dyn.io import _dynet_meta, _dynet_text
from dyn.io import _safetensors as st
from dyn.io._safetensors import ModelFileError

__all__ = [
    "ModelFileError", "save", "load", "load_generator", "register_savable",
    "save_trainer", "load_trainer",
]  # fmt: skip

FORMAT_VERSION = "1"
_KINDS = ("parameter", "lookup")
_FLOAT_CODES = ("F64", "F32", "F16", "BF16")


# ---------------------------------------------------------------- layouts


def _view_shape(kind, dim):
    """The shape as_array() gives: a lookup's DyNet dim (d..., N) reads as (N, d...)."""
    return (dim[-1],) + tuple(dim[:-1]) if kind == "lookup" else tuple(dim)


def _to_view(flat, kind, dim):
    """Pool layout (column-major over the DyNet dim) -> the as_array() array."""
    if kind == "lookup":
        k = len(dim) - 1
        return flat.reshape((dim[-1],) + tuple(dim[:-1])[::-1]).transpose((0,) + tuple(range(k, 0, -1)))
    return flat.reshape(dim, order="F")


def _from_view(arr, kind):
    """The inverse of _to_view: a flat array in pool layout."""
    if kind == "lookup":
        return arr.transpose((0,) + tuple(range(arr.ndim - 1, 0, -1))).reshape(-1)
    return arr.reshape(-1, order="F")


def _kind(p):
    return "lookup" if p.is_lookup else "parameter"


class _Entry:
    """One saved (lookup) parameter: its DyNet name, kind and dim, and how to
    get its values (and gradient) as flat arrays in pool layout. kind is None
    for a tensor of a safetensors file dyn did not write: dim is then its shape."""

    __slots__ = ("name", "kind", "dim", "dtype", "get", "get_grad")

    def __init__(self, name, kind, dim, dtype, get, get_grad=None):
        self.name, self.kind, self.dim, self.dtype = name, kind, tuple(dim), np.dtype(dtype)
        self.get, self.get_grad = get, get_grad or None

    @property
    def shape(self):
        return self.dim if self.kind is None else _view_shape(self.kind, self.dim)

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
            ok = self.kind == _kind(p) and self.dim == tuple(p.dyn_dim())
        if ok:
            return None
        return "saved %s does not fit %s (dim %s)" % (self.describe(), p, tuple(p.dyn_dim()))


def _constant(v):
    return lambda kind: v


def _entry_of(name, p, gradients):
    kind, dim = _kind(p), tuple(p.dyn_dim())
    get_grad = (lambda kind: p.grad_view()) if gradients else None
    return _Entry(name, kind, dim, p.pool.values.dtype, lambda kind: p.value_view(), get_grad)


# ---------------------------------------------------------------- reading files


class _ModelFile:
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
                _Entry(name, kind, dim, np.float32, _constant(v), g is not None and _constant(g))
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
                _Entry(n, None, t[1], st.DTYPES[t[0]], lambda kind, n=n: _from_view(sf.read(n), kind))
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
            if info[0] not in _FLOAT_CODES or info[1] != _view_shape(kind, dim):
                raise self.error(
                    "entry %d (%s): tensor %r is %s of shape %s; a %s of dim %s needs floats of shape %s"
                    % (i, name, t, info[0], info[1], kind, tuple(dim), _view_shape(kind, dim))
                )
            getters.append(lambda kind, t=t: _from_view(sf.read(t), kind))
        return _Entry(name, kind, dim, st.DTYPES[sf.tensors[r["tensor"]][0]], *getters)

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


def _collections(names):
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
        tensors.append((rec["tensor"], e.shape, e.dtype, lambda e=e: _to_view(e.values(), e.kind, e.dim)))
        if e.get_grad is not None:
            rec["grad"] = unique(e.name + "#grad")
            tensors.append((rec["grad"], e.shape, e.dtype, lambda e=e: _to_view(e.grads(), e.kind, e.dim)))
        records.append(rec)
    meta = {
        "format": "dyn",
        "format_version": FORMAT_VERSION,
        "entries": json.dumps(records),
        "collections": json.dumps(_collections(e.name for e in entries)),
    }
    if objects is not None:
        meta["objects"] = json.dumps(objects)
    st.write(path, tensors, meta)


def _write_model(path, items, append=False, gradients=False, format="safetensors", objects=None):
    """Write (saved name, parameter) items; with append, after the file's entries."""
    if format not in ("safetensors", "text"):
        raise ValueError("format must be 'safetensors' or 'text' (DyNet's text format), got %r" % (format,))
    entries = [_entry_of(name, p, gradients) for name, p in items]
    if append and os.path.exists(path):
        old = _ModelFile(path)
        if old.format == "safetensors":
            raise old.error("not a dyn model file: cannot append to it")
        entries = old.entries + entries
    if format == "text":
        _dynet_text.write(path, [(e.kind, e.name, e.dim, e.values, e.get_grad and e.grads) for e in entries])
    else:
        _write_safetensors(path, entries, objects)


def _check_name(name, collection):
    if not isinstance(name, str):
        raise TypeError("a saved name must be a str, got %r" % (name,))
    if re.search(r"[\s#]", name):
        raise ValueError("a saved name may not contain spaces or '#': %r" % name)
    if collection and name and not name.startswith("/"):
        raise ValueError("a collection's saved name must start with '/': %r" % name)


# ---------------------------------------------------------------- loading into parameters


def _assign(pairs):
    """Read every value first, then write: an unreadable file changes nothing."""
    staged = []
    for e, p in pairs:
        values = e.get(_kind(p))
        grads = None if e.get_grad is None else e.get_grad(_kind(p))
        staged.append((p, values, grads))
    for p, values, grads in staged:
        p.value_view()[:] = values
        p.grad_view()[:] = 0 if grads is None else grads
        if p.is_lookup:  # restored gradients may sit in any row: the next update is dense
            p.clear_touched() if grads is None else p.mark_all_touched()


def _populate_in_order(coll, entries, mf, what):
    """DyNet's populate: the i-th saved parameter (lookup) goes to the i-th of the collection."""
    if any(e.kind is None for e in entries):
        raise mf.error(
            "a safetensors file not written by dyn has no parameter order: populate its tensors "
            "one by one with Parameters.populate(fname, key) or load_param"
        )
    pe = [e for e in entries if e.kind == "parameter"]
    le = [e for e in entries if e.kind == "lookup"]
    ps, ls = coll.parameters_list(), coll.lookup_parameters_list()
    if len(pe) != len(ps) or len(le) != len(ls):
        raise mf.error(
            "%s holds %d parameters and %d lookup parameters; collection %s has %d and %d: nothing loaded"
            % (what, len(pe), len(le), coll.name(), len(ps), len(ls))
        )
    saved = pe + le
    problems = [msg for e, p in zip(saved, ps + ls) if (msg := e.misfit(p))]
    if problems:
        more = " (and %d more)" % (len(problems) - 3) if len(problems) > 3 else ""
        raise mf.error("nothing loaded: " + "; ".join(problems[:3]) + more)
    _assign(zip(saved, ps + ls))


def save_collection(coll, fname, name="", append=False, gradients=False, format="safetensors"):
    """ParameterCollection.save: every parameter, then every lookup parameter."""
    _check_name(name, True)
    ps = coll.parameters_list() + coll.lookup_parameters_list()
    if name:
        prefix, strip = (name if name.endswith("/") else name + "/"), len(coll.name())
        items = [(prefix + p.name()[strip:], p) for p in ps]
    else:
        items = [(p.name(), p) for p in ps]
    _write_model(os.fspath(fname), items, append, gradients, format)


def populate_collection(coll, fname, key=""):
    """ParameterCollection.populate: the saved entries whose names start with
    key (a '/' is added, as DyNet does), assigned by position."""
    mf = _ModelFile(fname)
    prefix = key if not key or key.endswith("/") else key + "/"
    chosen = [e for e in mf.entries if e.name.startswith(prefix)]
    _populate_in_order(coll, chosen, mf, "the file" if not key else "the file under %r" % prefix)


def save_parameter(p, fname, key="", append=False, gradients=False, format="safetensors"):
    """Parameters.save: this one parameter, named key (default: its own name)."""
    _check_name(key, False)
    _write_model(os.fspath(fname), [(key or p.name(), p)], append, gradients, format)


def populate_parameter(p, fname, key=""):
    """Parameters.populate: the saved entry named exactly key (default: p's own name)."""
    mf = _ModelFile(fname)
    e = mf.find(key or p.name(), _kind(p))
    msg = e.misfit(p)
    if msg:
        raise mf.error("nothing loaded: " + msg)
    _assign([(e, p)])


def _new_from_entry(coll, e, kind, name, path):
    from dyn.params import LookupParameters, Parameters

    dim = e.dim
    if e.kind is None:  # a foreign tensor: its shape is what as_array() will return
        if 0 in dim:
            raise ModelFileError("%s: %s has no values: it cannot become a parameter" % (path, e.describe()))
        if kind == "lookup":  # an (N, d...) table
            dim = tuple(dim[1:]) + (dim[0],) if len(dim) > 1 else (1, dim[0])
        dim = dim or (1,)
    values = e.get(kind)
    grads = None if e.get_grad is None else e.get_grad(kind)
    p = coll._new(LookupParameters if kind == "lookup" else Parameters, dim, values, "", kind == "lookup")
    p._name = name  # DyNet keeps the saved full name
    if grads is not None:
        p.grad_view()[:] = grads
        if p.is_lookup:
            p.mark_all_touched()
    return p


def load_param(coll, fname, key, lookup=False):
    """ParameterCollection.load_param / load_lookup_param: a new parameter in
    coll from the saved entry named exactly key, keeping that name."""
    mf = _ModelFile(fname)
    kind = "lookup" if lookup else "parameter"
    return _new_from_entry(coll, mf.find(key, kind), kind, key, mf.path)


# ---------------------------------------------------------------- dy.save / dy.load

_SAVABLE = {}  # name -> class: the allow-list of what dy.load may construct
_BUILTIN = ("Parameters", "LookupParameters", "ParameterCollection")


def register_savable(cls, name=None):
    """Let dy.save / dy.load handle instances of cls (usable as a decorator).

    cls must provide ``obj.spec`` (built from None, bool, int, float, str,
    lists, tuples, dicts with string keys and registered classes),
    ``obj.param_collection()`` and ``cls.from_spec(spec, model)``. dy.load
    constructs only registered classes, never one named by the file alone.
    """
    if not isinstance(cls, type) or not callable(getattr(cls, "from_spec", None)):
        raise TypeError("register_savable: %r is not a class with from_spec(spec, model)" % (cls,))
    name = name or cls.__name__
    if name in _BUILTIN or _SAVABLE.get(name, cls) is not cls:
        raise ValueError("register_savable: the name %r is taken" % name)
    _SAVABLE[name] = cls
    return cls


def _savable_name(cls):
    for name, c in _SAVABLE.items():
        if c is cls:
            return name
    return None


def _encode_spec(x):
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x)
    if isinstance(x, list):
        return [_encode_spec(v) for v in x]
    if isinstance(x, tuple):
        return {"tuple": [_encode_spec(v) for v in x]}
    if isinstance(x, dict) and all(isinstance(k, str) for k in x):
        return {"dict": {k: _encode_spec(v) for k, v in x.items()}}
    if isinstance(x, type) and _savable_name(x):
        return {"class": _savable_name(x)}
    raise TypeError(
        "dy.save: cannot store %r in a spec (allowed: None, bool, int, float, str, lists, tuples, "
        "dicts with string keys, classes registered with dyn.io.register_savable)" % (x,)
    )


def _decode_spec(x):
    if isinstance(x, list):
        return [_decode_spec(v) for v in x]
    if isinstance(x, dict):
        if len(x) == 1:
            ((tag, v),) = x.items()
            if tag == "tuple" and isinstance(v, list):
                return tuple(_decode_spec(u) for u in v)
            if tag == "dict" and isinstance(v, dict):
                return {k: _decode_spec(u) for k, u in v.items()}
            if tag == "class" and isinstance(v, str) and v in _SAVABLE:
                return _SAVABLE[v]
        raise ValueError("bad spec value %s" % st.short_repr(x))
    return x


def save(basename, objects):
    """Save parameters, lookup parameters, collections and registered builders.

    Writes ``basename.data``, a dyn model file whose metadata also lists the
    objects (type, name, spec, which entries), then ``basename.meta``, the
    same list as readable JSON (DyNet writes a pickle there; dyn never does).
    ``objects`` is any iterable; load them back with dy.load.
    """
    from dyn.params import ParameterCollection, Parameters

    items, records = [], []
    for obj in objects:
        start = len(items)
        if isinstance(obj, Parameters):
            rec = {"type": "LookupParameters" if obj.is_lookup else "Parameters", "name": obj.name()}
            items.append((obj.name(), obj))
        else:
            if isinstance(obj, ParameterCollection):
                pc, rec = obj, {"type": "ParameterCollection", "name": obj.name()}
            else:
                cname = _savable_name(type(obj))
                if cname is None:
                    raise TypeError(
                        "dy.save: cannot save a %s: save Parameters, LookupParameters, ParameterCollections "
                        "or classes registered with dyn.io.register_savable" % type(obj).__name__
                    )
                pc = obj.param_collection()
                rec = {"type": cname, "name": pc.name(), "spec": _encode_spec(obj.spec)}
            items += [(p.name(), p) for p in pc.parameters_list() + pc.lookup_parameters_list()]
        rec["entries"] = [start, len(items)]
        records.append(rec)
    _write_model(os.fspath(basename) + ".data", items, objects=records)
    meta = json.dumps(
        {"format": "dyn-objects", "format_version": FORMAT_VERSION, "objects": records}, indent=1
    )
    st.atomic_write(os.fspath(basename) + ".meta", lambda f: f.write(meta.encode()))


def _checked_objects(mf, basename):
    """The object records of a dy.save file, checked against its entries."""
    objects = mf.objects
    if objects is None:
        raise mf.error("holds no object list: was it written by dy.save? (use ParameterCollection.populate)")
    if not isinstance(objects, list):
        raise mf.error("metadata 'objects' is not a list")
    out = []
    for i, r in enumerate(objects):
        ok = isinstance(r, dict) and isinstance(r.get("type"), str) and isinstance(r.get("name"), str)
        span = r.get("entries") if ok else None
        ok = ok and isinstance(span, list) and len(span) == 2 and all(type(k) is int for k in span)
        if not ok or not 0 <= span[0] <= span[1] <= len(mf.entries):
            raise mf.error("object %d is malformed: %s" % (i, st.short_repr(r)))
        t, entries = r["type"], mf.entries[span[0] : span[1]]
        if t in ("Parameters", "LookupParameters"):
            kind = "parameter" if t == "Parameters" else "lookup"
            if len(entries) != 1 or entries[0].kind != kind or entries[0].name != r["name"]:
                raise mf.error("object %d (%s %s) does not match its saved entry" % (i, t, r["name"]))
            spec = None
        elif t == "ParameterCollection":
            if not (r["name"].startswith("/") and r["name"].endswith("/")):
                raise mf.error("object %d: %s is not a collection name" % (i, st.short_repr(r["name"])))
            if any(not e.name.startswith(r["name"]) for e in entries):
                raise mf.error("object %d: collection %s holds entries named outside it" % (i, r["name"]))
            spec = None
        elif t in _SAVABLE:
            st.check_plain(r.get("spec"), "%s: object %d (%s): spec" % (mf.path, i, t), max_values=None)
            try:
                spec = _decode_spec(r.get("spec"))
            except ValueError as e:
                raise mf.error("object %d (%s): %s" % (i, t, e)) from None
        else:
            raise mf.error(
                "object %d is a %s, which is not a registered savable class (dyn.io.register_savable)"
                % (i, st.short_repr(t))
            )
        out.append((t, r["name"], spec, entries))
    return out


def _dynet_objects(mf, basename):
    """The object records of a dy.save by DyNet: text .data and a pickled .meta,
    read as data (dyn/_dynet_meta.py); a builder's entries are found by its
    collection name, as DyNet's load does."""
    meta = os.fspath(basename) + ".meta"

    def resolve(x):  # the classes a spec names must be registered, by their class name
        if isinstance(x, _dynet_meta.ClassRef):
            if x.name not in _SAVABLE:
                raise ModelFileError(
                    "%s: class %s.%s is not a registered savable class (dyn.io.register_savable)"
                    % (meta, x.module, x.name)
                )
            return _SAVABLE[x.name]
        if isinstance(x, (list, tuple)):
            return type(x)(resolve(v) for v in x)
        if isinstance(x, dict):
            return {k: resolve(v) for k, v in x.items()}
        return x

    out = []
    for rec in _dynet_meta.read(meta):
        if isinstance(rec[0], str):
            out.append(
                (rec[0], rec[1], None, [mf.find(rec[1], "parameter" if rec[0] == "Parameters" else "lookup")])
            )
        else:
            cls, spec, name = resolve(rec[0]), resolve(rec[1]), rec[2]
            prefix = name if name.endswith("/") else name + "/"
            out.append((_savable_name(cls), name, spec, [e for e in mf.entries if e.name.startswith(prefix)]))
    return out


def _load_collection(params, name, entries, path):
    """A new collection named as saved, holding the saved parameters (names kept)."""
    from dyn.params import ParameterCollection

    coll = ParameterCollection(params, name)
    for e in entries:
        _new_from_entry(coll, e, e.kind, e.name, path)
        _claim(coll, e.name[len(name) :].split("/")[0])
    local = name[len(params.name()) :].rstrip("/") if name.startswith(params.name()) else ""
    if local and "/" not in local:  # a direct child of params: its name counts as used there
        _claim(params, local)
    return coll


def _claim(coll, local):
    """Count a loaded name ("a", "a_2", "_0") as used, so new ones do not repeat it."""
    m = re.match(r"^(.*)_([0-9]+)$", local)
    stem, k = (m.group(1), int(m.group(2))) if m else (local, 0)
    coll._counts[stem] = max(coll._counts.get(stem, 0), k + 1)


def load_generator(basename, params):
    """Yield what dy.save saved, in order, created inside ``params``: parameters
    keep their saved names, builders are rebuilt with ``cls.from_spec(spec,
    params)`` and populated. The file is validated before anything is created.

    Also loads what DyNet's dy.save wrote (text .data, pickled .meta): the
    .meta is read as plain data, never unpickled, and may name only classes
    registered with register_savable (by class name, e.g. VanillaLSTMBuilder).
    """
    from dyn.params import ParameterCollection

    if not isinstance(params, ParameterCollection):
        raise TypeError("dy.load: params must be a ParameterCollection, got %s" % type(params).__name__)
    mf = _ModelFile(os.fspath(basename) + ".data")
    objects = _dynet_objects(mf, basename) if mf.format == "dynet-text" else _checked_objects(mf, basename)
    for t, name, spec, entries in objects:
        if t in ("Parameters", "LookupParameters"):
            kind = entries[0].kind
            yield _new_from_entry(params, entries[0], kind, name, mf.path)
        elif t == "ParameterCollection":
            yield _load_collection(params, name, entries, mf.path)
        else:
            try:
                obj = _SAVABLE[t].from_spec(spec, params)
            except Exception as e:  # a spec the file made up: say which file and object
                raise mf.error(
                    "the saved %s %s: its spec %s does not build one (%s: %s)"
                    % (t, name, st.short_repr(spec), type(e).__name__, st.short_repr(str(e)))
                ) from e
            _populate_in_order(obj.param_collection(), entries, mf, "the saved %s %s" % (t, name))
            yield obj


def load(basename, params):
    """The list of everything dy.save saved (see load_generator)."""
    return list(load_generator(basename, params))


# ---------------------------------------------------------------- trainer state


def save_trainer(path, trainer):
    """Atomically save a trainer's state (``trainer.state_dict()``: name -> array)."""
    if not callable(getattr(trainer, "state_dict", None)):
        raise TypeError("%s has no state_dict(): its state cannot be saved" % type(trainer).__name__)
    tensors = []
    for k, v in trainer.state_dict().items():
        if not isinstance(k, str):
            raise TypeError("state_dict keys must be str, got %r" % (k,))
        tensors.append((k, np.asarray(v)))
    meta = {"format": "dyn-trainer", "format_version": FORMAT_VERSION, "trainer": type(trainer).__name__}
    st.write(os.fspath(path), tensors, meta)


def load_trainer(path, trainer):
    """Restore a trainer's state saved by save_trainer (``trainer.load_state_dict``);
    values come back as numpy arrays (0-d for scalars)."""
    if not callable(getattr(trainer, "load_state_dict", None)):
        raise TypeError("%s has no load_state_dict(): its state cannot be loaded" % type(trainer).__name__)
    sf = st.SafeTensorsFile(os.fspath(path))
    if sf.metadata.get("format") != "dyn-trainer":
        raise ModelFileError("%s: not a trainer state file (saved with dyn.io.save_trainer)" % sf.path)
    if sf.metadata.get("trainer") != type(trainer).__name__:
        raise ModelFileError(
            "%s: holds the state of a %s, not of a %s"
            % (sf.path, sf.metadata.get("trainer"), type(trainer).__name__)
        )
    trainer.load_state_dict(sf.read_all())
