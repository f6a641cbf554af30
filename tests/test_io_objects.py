"""dy.save / dy.load / dy.load_generator: parameters, collections and
builders (through dyn.io.register_savable), with no pickle anywhere."""

import json
import pickle  # only to write DyNet-style .meta files for the tests; dyn never unpickles
import sys
import types

import numpy as np
import pytest

import dyn as dy
from dyn import io
from dyn.io import ModelFileError, _safetensors


class Affine:
    """A minimal builder with what DyNet's builders give dy.save: spec,
    from_spec(spec, model) and param_collection()."""

    def __init__(self, in_dim, out_dim, model, options=None):
        self.spec = (in_dim, out_dim, options)
        self.pc = model.add_subcollection("affine")
        self.W = self.pc.add_parameters((out_dim, in_dim))
        self.E = self.pc.add_lookup_parameters((4, out_dim))
        self.b = self.pc.add_parameters(out_dim)

    @staticmethod
    def from_spec(spec, model):
        in_dim, out_dim, options = spec
        return Affine(in_dim, out_dim, model, options)

    def param_collection(self):
        return self.pc


io.register_savable(Affine)


def _same(ps, qs):
    for p, q in zip(ps, qs):
        assert p.name() == q.name()
        np.testing.assert_array_equal(p.as_array(), q.as_array())


def test_save_and_load_parameters_collections_and_builders(tmp_path):
    m = dy.ParameterCollection()
    W = m.add_parameters((3, 4), name="W")
    E = m.add_lookup_parameters((5, 2), name="E")
    sub = m.add_subcollection("enc")
    sub.add_parameters((2, 2), name="a")
    sub.add_parameters(2, name="a")
    aff = Affine(4, 3, m, options={"act": "tanh", "sizes": (1, [2.5, None]), "cls": Affine, "flag": True})
    base = str(tmp_path / "run")
    dy.save(base, (x for x in [W, E, sub, aff]))  # any iterable

    meta = json.loads((tmp_path / "run.meta").read_text())  # readable JSON, not a pickle
    types = ["Parameters", "LookupParameters", "ParameterCollection", "Affine"]
    assert [o["type"] for o in meta["objects"]] == types

    params = dy.ParameterCollection()
    W2, E2, sub2, aff2 = dy.load(base, params)
    _same([W2, E2], [W, E])
    assert isinstance(E2, dy.LookupParameters) and isinstance(sub2, dy.ParameterCollection)
    assert sub2.name() == "/enc/"
    _same(sub2.parameters_list(), sub.parameters_list())
    assert sub2.add_parameters(2, name="a").name() == "/enc/a_2"  # loaded names count as used
    assert isinstance(aff2, Affine) and aff2.spec == aff.spec  # tuples, dicts, classes survive
    assert aff2.spec[2]["cls"] is Affine and aff2.spec[2]["sizes"] == (1, [2.5, None])
    _same([aff2.W, aff2.E, aff2.b], [aff.W, aff.E, aff.b])
    assert set(params.parameters_list()) >= {W2, aff2.W, aff2.b}

    gen = dy.load_generator(base, dy.ParameterCollection())
    assert next(gen).name() == "/W" and next(gen).name() == "/E"
    # the .data file is an ordinary model file: a builder's part populates on its own
    again = Affine(4, 3, dy.ParameterCollection())
    again.param_collection().populate(base + ".data", "/affine/")
    _same([again.W, again.E, again.b], [aff.W, aff.E, aff.b])


def test_only_known_objects_and_values_are_saved(tmp_path):
    m = dy.ParameterCollection()
    with pytest.raises(TypeError, match="cannot save a dict"):
        dy.save(str(tmp_path / "x"), [{"not": "savable"}])
    with pytest.raises(TypeError, match="cannot store .*lambda"):
        dy.save(str(tmp_path / "x"), [Affine(2, 2, m, options=lambda: 0)])
    assert not list(tmp_path.iterdir())  # nothing written
    with pytest.raises(ValueError, match="taken"):
        io.register_savable(Affine, "Parameters")
    with pytest.raises(TypeError, match="from_spec"):
        io.register_savable(int)
    with pytest.raises(TypeError, match="must be a ParameterCollection"):
        dy.load(str(tmp_path / "x"), None)


def _rewrite_objects(path, edit):
    """Rewrite a .data file's object list (as a hostile or corrupt file would)."""
    sf = _safetensors.SafeTensorsFile(path)
    meta = dict(sf.metadata)
    objects = json.loads(meta["objects"])
    edit(objects)
    meta["objects"] = json.dumps(objects)
    _safetensors.write(path, sf.read_all().items(), meta)


def test_load_checks_every_object_before_creating_any(tmp_path):
    m = dy.ParameterCollection()
    W = m.add_parameters((3, 4), name="W")
    base = str(tmp_path / "run")
    dy.save(base, [W, Affine(4, 3, m)])
    cases = [
        (lambda o: o[1].update(type="os.system"), "'os.system', which is not a registered savable class"),
        (lambda o: o[0].update(name="/V"), r"object 0 \(Parameters /V\) does not match"),
        (lambda o: o[1].update(entries=[1, 9]), "object 1 is malformed"),
        (lambda o: o[1].update(spec={"lambda": "x"}), r"object 1 \(Affine\): bad spec value"),
        (lambda o: o.append({"type": "ParameterCollection", "name": "/x/", "entries": [0, 1]}), "outside it"),
        (
            lambda o: o.append({"type": "ParameterCollection", "name": "", "entries": [0, 0]}),
            "not a collection name",
        ),
    ]
    for edit, message in cases:
        dy.save(base, [W, Affine(4, 3, m)])
        _rewrite_objects(base + ".data", edit)
        params = dy.ParameterCollection()
        with pytest.raises(ModelFileError, match=message):
            dy.load(base, params)
        assert params.parameters_list() == []  # nothing was created
    # a builder whose spec no longer matches its saved parameters
    dy.save(base, [Affine(4, 3, m)])
    _rewrite_objects(base + ".data", lambda o: o[0].update(spec={"tuple": [5, 3, None]}))
    with pytest.raises(ModelFileError, match=r"/affine_\d+/_0 of dim \(3, 4\) does not fit .*\(3, 5\)"):
        dy.load(base, dy.ParameterCollection())
    # a file written by ParameterCollection.save has no object list
    m.save(base + ".data")
    with pytest.raises(ModelFileError, match="no object list"):
        dy.load(base, dy.ParameterCollection())


class _Hostile:
    def __reduce__(self):
        return (print, ("code ran while loading",))


@pytest.mark.parametrize("protocol", [2, 3, 4])
def test_load_reads_dynet_files_without_unpickling(tmp_path, monkeypatch, capsys, protocol):
    """DyNet's dy.save: text .data plus a .meta of pickled records. The .meta
    is read as data; a class it names must be registered (by class name)."""
    m = dy.ParameterCollection()
    W = m.add_parameters((3, 4), name="W")
    aff = Affine(4, 3, m)
    base = str(tmp_path / "dynet")
    m.save(base + ".data", format="text")  # what DyNet writes to .data
    # what DyNet pickles to .meta: the builder's class lives in DyNet's module
    fake = types.ModuleType("_dynet")
    fake.Affine = type("Affine", (), {"__module__": "_dynet"})
    monkeypatch.setitem(sys.modules, "_dynet", fake)
    records = [
        ("Parameters", "/W"),
        (fake.Affine, (4, 3, {"factory": fake.Affine, "n": [1, (2,)]}), "/affine/"),
    ]
    (tmp_path / "dynet.meta").write_bytes(b"".join(pickle.dumps(r, protocol=protocol) for r in records))

    W2, aff2 = dy.load(base, dy.ParameterCollection())
    _same([W2, aff2.W, aff2.E, aff2.b], [W, aff.W, aff.E, aff.b])
    assert aff2.spec == (4, 3, {"factory": Affine, "n": [1, (2,)]})

    # a .meta that would run code when unpickled is refused, and runs nothing
    (tmp_path / "dynet.meta").write_bytes(pickle.dumps(("Parameters", "/W")) + pickle.dumps(_Hostile()))
    with pytest.raises(ModelFileError, match="opcode REDUCE is not plain data"):
        dy.load(base, dy.ParameterCollection())
    assert "code ran" not in capsys.readouterr().out
    # unknown classes are refused by name
    fake.Other = type("Other", (), {"__module__": "_dynet"})
    (tmp_path / "dynet.meta").write_bytes(pickle.dumps((fake.Other, (1,), "/other/")))
    with pytest.raises(ModelFileError, match="class _dynet.Other is not a registered savable class"):
        dy.load(base, dy.ParameterCollection())
    (tmp_path / "dynet.meta").write_bytes(pickle.dumps(["not", "a", "record"]))
    with pytest.raises(ModelFileError, match="not a record DyNet's dy.save writes"):
        dy.load(base, dy.ParameterCollection())
    (tmp_path / "dynet.meta").write_bytes(pickle.dumps(("Parameters", "/W"))[:-3])
    with pytest.raises(ModelFileError, match="malformed pickle"):
        dy.load(base, dy.ParameterCollection())
