"""Saving and populating parameters and collections (ParameterCollection.save,
populate, load_param; Parameters.save, populate).

populate assigns by position, as DyNet does: the i-th saved parameter goes to
the i-th parameter of the collection, lookups likewise. Every load reads and
checks the whole file before it writes anything.

Parameters are made and changed only through their collection's and their
own methods: this module imports nothing of dyn.params (which imports it).
"""

from __future__ import annotations

import os
import re

from dyn.io._format import ModelFile, kind_of, write_model
from dyn.io._safetensors import ModelFileError

# ---------------------------------------------------------------- saving


def _check_name(name, collection):
    if not isinstance(name, str):
        raise TypeError("a saved name must be a str, got %r" % (name,))
    if re.search(r"[\s#]", name):
        raise ValueError("a saved name may not contain spaces or '#': %r" % name)
    if collection and name and not name.startswith("/"):
        raise ValueError("a collection's saved name must start with '/': %r" % name)


def save_collection(coll, fname, name="", append=False, gradients=None, format="safetensors"):
    """ParameterCollection.save: every parameter, then every lookup parameter."""
    _check_name(name, True)
    ps = coll.parameters_list() + coll.lookup_parameters_list()
    if name:
        prefix, strip = (name if name.endswith("/") else name + "/"), len(coll.name())
        items = [(prefix + p.name()[strip:], p) for p in ps]
    else:
        items = [(p.name(), p) for p in ps]
    write_model(os.fspath(fname), items, append, gradients, format)


def save_parameter(p, fname, key="", append=False, gradients=None, format="safetensors"):
    """Parameters.save: this one parameter, named key (default: its own name)."""
    _check_name(key, False)
    write_model(os.fspath(fname), [(key or p.name(), p)], append, gradients, format)


# ---------------------------------------------------------------- loading into parameters


def _assign(pairs):
    """Read every value first, then write: an unreadable file changes nothing."""
    staged = []
    for e, p in pairs:
        values = e.get(kind_of(p))
        grads = None if e.get_grad is None else e.get_grad(kind_of(p))
        staged.append((p, values, grads))
    for p, values, grads in staged:
        p.write_values(values)
        p.write_grads(0 if grads is None else grads)
        if p.is_lookup:  # restored gradients may sit in any row: the next update is dense
            p.clear_touched() if grads is None else p.mark_all_touched()


def populate_in_order(coll, entries, mf, what):
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


def populate_collection(coll, fname, key=""):
    """ParameterCollection.populate: the saved entries whose names start with
    key (a '/' is added, as DyNet does), assigned by position."""
    mf = ModelFile(fname)
    prefix = key if not key or key.endswith("/") else key + "/"
    chosen = [e for e in mf.entries if e.name.startswith(prefix)]
    populate_in_order(coll, chosen, mf, "the file" if not key else "the file under %r" % prefix)


def populate_parameter(p, fname, key=""):
    """Parameters.populate: the saved entry named exactly key (default: p's own name)."""
    mf = ModelFile(fname)
    e = mf.find(key or p.name(), kind_of(p))
    msg = e.misfit(p)
    if msg:
        raise mf.error("nothing loaded: " + msg)
    _assign([(e, p)])


def new_from_entry(coll, e, kind, name, path):
    """A new parameter in coll holding entry e's values (and gradient), named name."""
    dim = e.dim
    if e.kind is None:  # a foreign tensor: its shape is what as_array() will return
        if 0 in dim:
            raise ModelFileError("%s: %s has no values: it cannot become a parameter" % (path, e.describe()))
        if kind == "lookup":  # an (N, d...) table
            dim = tuple(dim[1:]) + (dim[0],) if len(dim) > 1 else (1, dim[0])
        dim = dim or (1,)
    values = e.get(kind)
    grads = None if e.get_grad is None else e.get_grad(kind)
    p = coll._new_loaded(dim, values, kind == "lookup")
    p._name = name  # DyNet keeps the saved full name
    if grads is not None:
        p.write_grads(grads)
        if p.is_lookup:
            p.mark_all_touched()
    return p


def load_param(coll, fname, key, lookup=False):
    """ParameterCollection.load_param / load_lookup_param: a new parameter in
    coll from the saved entry named exactly key, keeping that name."""
    mf = ModelFile(fname)
    kind = "lookup" if lookup else "parameter"
    return new_from_entry(coll, mf.find(key, kind), kind, key, mf.path)
