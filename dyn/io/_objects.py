"""dy.save / dy.load, and the registry of what they may save and rebuild.

dy.save writes ``basename.data``, a dyn model file whose metadata also lists
the saved objects, each as {"type", "name", "spec" (builders only),
"entries": [start, stop]} (its slice of the file's entries), and
``basename.meta``, the same list as readable JSON. dy.load rebuilds only
Parameters, LookupParameters, ParameterCollections and classes registered
with register_savable; it also reads what DyNet's dy.save wrote (a text
.data and a pickled .meta, read as plain data by dyn/io/_dynet_meta.py).
"""

from __future__ import annotations

import json
import os
import re

import numpy as np

from dyn.io import _dynet_meta
from dyn.io import _safetensors as st
from dyn.io._collections import new_from_entry, populate_in_order
from dyn.io._format import FORMAT_VERSION, ModelFile, write_model
from dyn.io._safetensors import ModelFileError

# dy.save takes, and dy.load makes, the classes of dyn.params. dyn.params imports
# io (its save and populate methods call dyn/io/_collections.py), so it hands
# them over here once they are defined, and io never imports dyn.params.
_Parameters = _ParameterCollection = None


def use_parameter_classes(parameters, collection):
    """Called by dyn.params: its Parameters (LookupParameters derives from it)
    and ParameterCollection classes."""
    global _Parameters, _ParameterCollection
    _Parameters, _ParameterCollection = parameters, collection


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
    items, records = [], []
    for obj in objects:
        start = len(items)
        if isinstance(obj, _Parameters):
            rec = {"type": "LookupParameters" if obj.is_lookup else "Parameters", "name": obj.name()}
            items.append((obj.name(), obj))
        else:
            if isinstance(obj, _ParameterCollection):
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
    write_model(os.fspath(basename) + ".data", items, objects=records)
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
    read as data (dyn/io/_dynet_meta.py); a builder's entries are found by its
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
    coll = _ParameterCollection(params, name)
    for e in entries:
        new_from_entry(coll, e, e.kind, e.name, path)
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
    if not isinstance(params, _ParameterCollection):
        raise TypeError("dy.load: params must be a ParameterCollection, got %s" % type(params).__name__)
    mf = ModelFile(os.fspath(basename) + ".data")
    objects = _dynet_objects(mf, basename) if mf.format == "dynet-text" else _checked_objects(mf, basename)
    for t, name, spec, entries in objects:
        if t in ("Parameters", "LookupParameters"):
            kind = entries[0].kind
            yield new_from_entry(params, entries[0], kind, name, mf.path)
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
            populate_in_order(obj.param_collection(), entries, mf, "the saved %s %s" % (t, name))
            yield obj


def load(basename, params):
    """The list of everything dy.save saved (see load_generator)."""
    return list(load_generator(basename, params))
