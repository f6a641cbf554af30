"""Saving and loading parameters and collections (dyn/io/): round trips,
DyNet's populate semantics, and loads that check everything before writing."""

import json
import struct

import numpy as np
import pytest

import dyn as dy
from dyn.io import ModelFileError, _safetensors


def _model(seed=0):
    """A collection with a matrix, a vector, a sub-collection and two lookup tables."""
    rng = np.random.RandomState(seed)
    m = dy.ParameterCollection()
    ps = [m.add_parameters((3, 4), init=rng.randn(3, 4), name="W"), m.add_parameters(3, init=rng.randn(3))]
    sub = m.add_subcollection("lstm")
    ps.append(sub.add_parameters((2, 5), init=rng.randn(2, 5)))
    ps.append(sub.add_lookup_parameters((6, 2, 3), init=rng.randn(6, 2, 3), name="E"))
    ps.append(m.add_lookup_parameters((4, 2), init=rng.randn(4, 2)))
    return m, sub, ps


def _values(ps):
    return [p.as_array() for p in ps]


def _assert_same(xs, ys):
    assert len(xs) == len(ys)
    for x, y in zip(xs, ys):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_collection_round_trip_is_exact(tmp_path, precision):
    dy.set_precision(precision)
    try:
        m, _, ps = _model(0)
        m.save(tmp_path / "m.st")
        m2, _, ps2 = _model(1)
        m2.populate(str(tmp_path / "m.st"))
        _assert_same(_values(ps2), _values(ps))
        assert ps2[0].value_view().dtype == np.dtype(precision)
    finally:
        dy.set_precision("float32")


def test_file_is_plain_safetensors_named_by_dynet_names(tmp_path):
    """Any safetensors reader sees as_array() under each full name; the
    metadata records kind, DyNet dim and the collections."""
    m, _, ps = _model()
    m.save(tmp_path / "m.st")
    tensors, meta = _safetensors.read(tmp_path / "m.st")
    assert list(tensors) == ["/W", "/_0", "/lstm/_0", "/lstm/E", "/_1"]  # parameters first, then lookups
    for p in ps:
        np.testing.assert_array_equal(tensors[p.name()], p.as_array())
    assert tensors["/lstm/E"].shape == (6, 2, 3) and tensors["/W"].dtype == np.float32
    assert meta["format"] == "dyn"
    entries = json.loads(meta["entries"])
    assert entries[3] == {"name": "/lstm/E", "kind": "lookup", "dim": [2, 3, 6], "tensor": "/lstm/E"}
    assert json.loads(meta["collections"]) == ["/", "/lstm/"]


def test_populate_checks_counts_and_dims_before_writing(tmp_path):
    m, _, _ = _model()
    m.save(tmp_path / "m.st")
    # one parameter too many
    m2, _, ps2 = _model(1)
    m2.add_parameters(2)
    before = _values(ps2)
    with pytest.raises(ModelFileError, match="3 parameters and 2 lookup parameters.*has 4 and 2"):
        m2.populate(tmp_path / "m.st")
    _assert_same(_values(ps2), before)
    # same counts, one dim differs (the last parameter: earlier ones would fit)
    m3 = dy.ParameterCollection()
    ps3 = [m3.add_parameters((3, 4)), m3.add_parameters(3), m3.add_parameters((5, 2))]
    ps3 += [m3.add_lookup_parameters((6, 2, 3)), m3.add_lookup_parameters((4, 2))]
    before = _values(ps3)
    with pytest.raises(ModelFileError, match=r"/lstm/_0 of dim \(2, 5\) does not fit .*\(5, 2\)") as err:
        m3.populate(tmp_path / "m.st")
    assert "nothing loaded" in str(err.value) and str(tmp_path / "m.st") in str(err.value)
    _assert_same(_values(ps3), before)
    # DyNet raises RuntimeError here; dyn's error is both
    with pytest.raises(RuntimeError):
        m3.populate(tmp_path / "m.st")


def test_populate_key_selects_a_prefix_and_save_name_renames(tmp_path):
    m, sub, ps = _model()
    m.save(tmp_path / "m.st")
    other = dy.ParameterCollection()
    a = other.add_parameters((2, 5))
    e = other.add_lookup_parameters((6, 2, 3))
    other.populate(tmp_path / "m.st", "/lstm")  # DyNet adds the '/'
    _assert_same([a.as_array(), e.as_array()], [ps[2].as_array(), ps[3].as_array()])
    # saved under another prefix, the sub-collection's entries are found by that prefix
    sub.save(tmp_path / "sub.st", name="/enc")
    assert list(_safetensors.read(tmp_path / "sub.st")[0]) == ["/enc/_0", "/enc/E"]
    other.populate(tmp_path / "sub.st", "/enc/")
    with pytest.raises(ModelFileError, match="0 parameters and 0 lookup"):
        other.populate(tmp_path / "sub.st", "/lstm/")
    with pytest.raises(ValueError, match="must start with '/'"):
        sub.save(tmp_path / "x.st", name="enc")
    with pytest.raises(ValueError, match="spaces or '#'"):
        sub.save(tmp_path / "x.st", name="/a b")


def test_append_keeps_earlier_entries(tmp_path):
    m1, _, ps1 = _model(0)
    m2, _, ps2 = _model(1)
    m1.save(tmp_path / "both.st", name="/first")
    m2.save(tmp_path / "both.st", name="/second", append=True)
    m3, _, ps3 = _model(2)
    m3.populate(tmp_path / "both.st", "/second")
    _assert_same(_values(ps3), _values(ps2))
    m3.populate(tmp_path / "both.st", "/first/")
    _assert_same(_values(ps3), _values(ps1))
    # the same names twice (DyNet allows it): positions still work, exact-name loads find the first
    m1.save(tmp_path / "twice.st")
    m2.save(tmp_path / "twice.st", append=True)
    with pytest.raises(ModelFileError, match="6 parameters and 4 lookup"):
        m3.populate(tmp_path / "twice.st")
    np.testing.assert_array_equal(m3.load_param(tmp_path / "twice.st", "/W").as_array(), ps1[0].as_array())


def test_parameters_save_and_populate_by_exact_name(tmp_path):
    m, _, ps = _model()
    W, E = ps[0], ps[3]
    W.save(tmp_path / "w.st")
    E.save(tmp_path / "w.st", key="/emb", append=True)
    m2, _, ps2 = _model(1)
    ps2[0].populate(tmp_path / "w.st")  # default key: its own name
    ps2[3].populate(tmp_path / "w.st", "/emb")
    ps2[3].populate_from_textfile(tmp_path / "w.st", "/emb")  # DyNet's older name
    _assert_same([ps2[0].as_array(), ps2[3].as_array()], [W.as_array(), E.as_array()])
    with pytest.raises(ModelFileError, match="no parameter named '/V'.*holds: /W, /emb"):
        ps2[0].populate(tmp_path / "w.st", "/V")
    with pytest.raises(ModelFileError, match="/emb is saved as a lookup, not a parameter"):
        ps2[0].populate(tmp_path / "w.st", "/emb")
    before = ps2[1].as_array()
    with pytest.raises(ModelFileError, match="does not fit"):
        ps2[1].populate(tmp_path / "w.st", "/W")
    np.testing.assert_array_equal(ps2[1].as_array(), before)


def test_load_param_creates_parameters_with_the_saved_names(tmp_path):
    m, _, ps = _model()
    m.save(tmp_path / "m.st")
    target = dy.ParameterCollection().add_subcollection("x")
    W = target.load_param(tmp_path / "m.st", "/W")
    E = target.load_lookup_param(tmp_path / "m.st", "/lstm/E")
    assert (W.name(), E.name()) == ("/W", "/lstm/E")
    assert isinstance(E, dy.LookupParameters) and len(E) == 6
    np.testing.assert_array_equal(W.as_array(), ps[0].as_array())
    np.testing.assert_array_equal(E.as_array(), ps[3].as_array())
    assert target.parameters_list() == [W] and target.lookup_parameters_list() == [E]
    # the loaded parameters are ordinary parameters: they train
    dy.renew_cg()
    dy.sum_elems(W * dy.inputVector([1.0, 2.0, 3.0, 4.0]) + E[2][0]).backward()
    dy.SimpleSGDTrainer(target).update()
    assert not np.array_equal(W.as_array(), ps[0].as_array())
    with pytest.raises(ModelFileError, match="/W is saved as a parameter, not a lookup"):
        target.load_lookup_param(tmp_path / "m.st", "/W")


def test_gradients_are_saved_as_dynet_does_or_as_asked_and_populate_restores_them(tmp_path):
    m = dy.ParameterCollection()
    W = m.add_parameters((2, 3))
    E = m.add_lookup_parameters((4, 2))
    dy.sum_elems(W * dy.inputVector([1.0, 2.0, 3.0]) + E[1][0]).backward()
    grads = [W.grad_as_array(), E.grad_as_array()]
    assert grads[0].any() and grads[1].any()
    m.save(tmp_path / "g.st", gradients=True)
    m.save(tmp_path / "nog.st", gradients=False)
    m.save(tmp_path / "auto.st")          # DyNet's default: the gradients that are not all zeros
    assert sorted(_safetensors.read(tmp_path / "g.st")[0]) == ["/_0", "/_0#grad", "/_1", "/_1#grad"]
    assert sorted(_safetensors.read(tmp_path / "auto.st")[0]) == ["/_0", "/_0#grad", "/_1", "/_1#grad"]
    m.populate(tmp_path / "nog.st")
    assert not W.grad_as_array().any() and not E.grad_as_array().any() and len(E.touched_rows()) == 0
    m.save(tmp_path / "zero.st")          # all zeros now: not saved
    assert sorted(_safetensors.read(tmp_path / "zero.st")[0]) == ["/_0", "/_1"]
    m.populate(tmp_path / "g.st")
    _assert_same([W.grad_as_array(), E.grad_as_array()], grads)
    assert E.touched_all()  # a restored lookup gradient is applied densely
    m.populate(tmp_path / "zero.st")
    assert not W.grad_as_array().any() and not E.grad_as_array().any()
    m.populate(tmp_path / "auto.st")      # DyNet's tests/python: save, populate, the gradients kept
    _assert_same([W.grad_as_array(), E.grad_as_array()], grads)


def test_populate_restores_values_after_training(tmp_path):
    m, _, ps = _model()
    saved = _values(ps)
    m.save(tmp_path / "m.st")
    t = dy.SimpleSGDTrainer(m)
    for _ in range(3):
        dy.renew_cg()
        dy.sum_elems(ps[0] * dy.inputVector([1.0, 2.0, 3.0, 4.0])).backward()
        t.update()
    assert not np.array_equal(ps[0].as_array(), saved[0])
    m.write_to_textfile  # noqa: B018  (DyNet's older names exist)
    m.populate_from_textfile(tmp_path / "m.st")
    _assert_same(_values(ps), saved)


def test_foreign_safetensors_load_by_name_only(tmp_path):
    """A safetensors file from elsewhere: tensors are what as_array() would be."""
    w = np.arange(12.0).reshape(3, 4)
    emb = np.arange(10.0).reshape(5, 2)
    _safetensors.write(tmp_path / "f.st", {"enc.weight": w, "emb": emb.astype(np.float16)}.items())
    m = dy.ParameterCollection()
    W = m.add_parameters((3, 4))
    W.populate(tmp_path / "f.st", "enc.weight")
    np.testing.assert_array_equal(W.as_array(), w)
    E = m.load_lookup_param(tmp_path / "f.st", "emb")
    np.testing.assert_array_equal(E.as_array(), emb)
    np.testing.assert_array_equal(E.row_as_array(3), emb[3])
    with pytest.raises(ModelFileError, match="does not fit"):
        m.add_parameters((4, 3)).populate(tmp_path / "f.st", "enc.weight")
    with pytest.raises(ModelFileError, match="no parameter order"):
        m.populate(tmp_path / "f.st")
    with pytest.raises(ModelFileError, match="cannot append"):
        W.save(tmp_path / "f.st", append=True)


def test_bad_files_raise_naming_the_file(tmp_path):
    m, _, ps = _model()
    (tmp_path / "junk.st").write_bytes(b"PK\x03\x04 not a model at all")
    with pytest.raises(ModelFileError, match="junk.st: neither a safetensors file nor a DyNet text"):
        m.populate(tmp_path / "junk.st")
    with pytest.raises(FileNotFoundError):
        m.populate(tmp_path / "missing.st")
    # a dyn file whose entry list names a tensor that is not there
    _safetensors.write(
        tmp_path / "bad.st",
        [("/W", np.zeros((3, 4), np.float32))],
        {"format": "dyn", "format_version": "1", "entries": '[{"name": "/W", "kind": "parameter", '
         '"dim": [4, 3], "tensor": "/W"}]'},
    )  # fmt: skip
    with pytest.raises(ModelFileError, match=r"bad.st: entry 0 \(/W\): tensor '/W' is F32 of shape \(3, 4\)"):
        ps[0].populate(tmp_path / "bad.st")
    _safetensors.write(tmp_path / "v2.st", [], {"format": "dyn", "format_version": "2", "entries": "[]"})
    with pytest.raises(ModelFileError, match="format version '2'"):
        m.populate(tmp_path / "v2.st")
    with pytest.raises(ValueError, match="format must be"):
        m.save(tmp_path / "x", format="pickle")
    # a model file cut short (a copy interrupted, a full disk): nothing is loaded
    m.save(tmp_path / "m.st")
    raw = (tmp_path / "m.st").read_bytes()
    (tmp_path / "cut.st").write_bytes(raw[:-10])
    m2, _, ps2 = _model(1)
    before = _values(ps2)
    with pytest.raises(ModelFileError, match="cut.st: tensor '/_1': data_offsets .* out of range"):
        m2.populate(tmp_path / "cut.st")
    _assert_same(_values(ps2), before)


def test_precision_is_converted_on_load(tmp_path):
    m, _, ps = _model()
    m.save(tmp_path / "m32.st")
    dy.set_precision("float64")
    try:
        m64, _, ps64 = _model(1)
        m64.populate(tmp_path / "m32.st")
        _assert_same(_values(ps64), [v.astype(np.float64) for v in _values(ps)])
        assert ps64[0].value_view().dtype == np.float64
    finally:
        dy.set_precision("float32")


def test_a_safetensors_header_length_starting_with_hash_is_not_text(tmp_path):
    """Header length 0x123: the file's first byte is '#', as in DyNet's text format."""
    m = dy.ParameterCollection()
    W = m.add_parameters(2, init=0.0)
    header = {"/x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "__metadata__": {"pad": ""}}
    raw = json.dumps(header).encode()
    header["__metadata__"]["pad"] = "p" * (0x123 - len(raw))
    raw = json.dumps(header).encode()
    assert len(raw) == 0x123
    (tmp_path / "h.st").write_bytes(struct.pack("<Q", len(raw)) + raw + np.ones(2, np.float32).tobytes())
    W.populate(tmp_path / "h.st", "/x")
    np.testing.assert_array_equal(W.as_array(), [1.0, 1.0])
