"""ParameterCollection, Parameters, LookupParameters and initialisers."""

import numpy as np
import pytest

import dyn as dy


def test_names_follow_dynet():
    m = dy.ParameterCollection()
    assert m.name() == "/"
    assert [m.add_parameters(2).name() for _ in range(2)] == ["/_0", "/_1"]
    assert m.add_parameters(2, name="a").name() == "/a"
    assert m.add_parameters(2, name="a").name() == "/a_1"
    sub = m.add_subcollection("lstm")
    assert sub.name() == "/lstm/"
    assert m.add_subcollection("lstm").name() == "/lstm_1/"
    w = sub.add_parameters((2, 2), name="w")
    assert w.name() == "/lstm/w"
    assert w in m.parameters_list() and w in sub.parameters_list()
    e = sub.add_lookup_parameters((5, 2), name="e")
    assert e in m.lookup_parameters_list()
    assert str(w) == "Parameter /lstm/w" and str(e) == "LookupParameter /lstm/e"
    with pytest.raises(RuntimeError):
        m.add_parameters(2, name="a/b")
    assert m.parameter_count() == 2 * 4 + 4 + 10
    assert dy.Model is dy.ParameterCollection


def test_init_forms():
    m = dy.ParameterCollection()
    assert np.all(m.add_parameters((2, 3), init=0.5).as_array() == 0.5)
    np.testing.assert_array_equal(m.add_parameters((3, 3), init="identity").as_array(), np.eye(3))
    g = m.add_parameters((40, 60)).as_array()  # Glorot: U(-sqrt(6/100), sqrt(6/100))
    assert np.abs(g).max() <= np.sqrt(6 / 100) and np.abs(g).max() > 0.9 * np.sqrt(6 / 100)
    u = m.add_parameters((50, 50), init="uniform", scale=0.1).as_array()
    assert np.abs(u).max() <= 0.1
    n = m.add_parameters((100, 100), init="normal", mean=1.0, std=0.5).as_array()
    assert abs(n.mean() - 1.0) < 0.02 and abs(n.std() - 0.5) < 0.02
    he = m.add_parameters((100, 50), init="he").as_array()
    assert abs(he.var() - 1 / 100) < 0.002
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(m.add_parameters((9, 9), init=a).as_array(), a)
    np.testing.assert_array_equal(m.parameters_from_numpy(a).as_array(), a)
    np.testing.assert_array_equal(m.add_parameters((2, 3), init=dy.NumpyInitializer(a)).as_array(), a)
    nv = m.add_parameters((200, 200), init=dy.NormalInitializer(0, 4.0)).as_array()
    assert abs(nv.var() - 4.0) < 0.1  # variance, not std
    o = m.add_parameters((8, 8), init=dy.SaxeInitializer()).as_array()
    np.testing.assert_allclose(o @ o.T, np.eye(8), atol=1e-5)
    with pytest.raises(ValueError):
        m.add_parameters(3, init="saxe")
    with pytest.raises(AssertionError):
        dy.PyInitializer()
    with pytest.raises(ValueError):
        dy.UniformInitializer(0)


def test_from_file_initializer(tmp_path):
    f = tmp_path / "v.txt"
    f.write_text("1 2 3 4\n5 6\n")
    m = dy.ParameterCollection()
    p = m.add_parameters((2, 3), init=dy.FromFileInitializer(str(f)))
    np.testing.assert_array_equal(p.as_array(), np.arange(1.0, 7.0).reshape(2, 3, order="F"))


def test_parameter_accessors():
    m = dy.ParameterCollection()
    p = m.add_parameters((2, 3), init=1.0)
    assert p.shape() == (2, 3)
    p.set_value(np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(p.as_array(), np.arange(6.0).reshape(2, 3))
    with pytest.raises(ValueError):
        p.set_value(np.zeros((3, 2)))
    p.scale(2.0)
    assert p.as_array()[1, 2] == 10.0
    p.clip_inplace(0.0, 4.0)
    assert p.as_array().max() == 4.0
    np.testing.assert_array_equal(p.npvalue(), p.as_array())  # a parameter is an expression
    assert p.dim() == ((2, 3), 1)
    p.zero()
    assert not p.as_array().any()
    assert p.is_updated()
    p.set_updated(False)
    assert not p.is_updated()


def test_expr_update_flag_and_const_parameter():
    m = dy.ParameterCollection()
    p = m.add_parameters((2,), init=1.0)
    dy.sum_elems(p.expr()).backward()  # expr() is constant by default (DyNet)
    assert not p.grad_as_array().any()
    dy.renew_cg()
    dy.sum_elems(dy.const_parameter(p)).backward()
    assert not p.grad_as_array().any()
    dy.renew_cg()
    dy.sum_elems(p.expr(True)).backward()
    np.testing.assert_array_equal(p.grad_as_array(), [1.0, 1.0])
    assert dy.parameter(p) is p


def test_lookup_rows_and_touched():
    m = dy.ParameterCollection()
    table = np.arange(12.0).reshape(4, 3)
    E = m.add_lookup_parameters((4, 3), init=table)
    assert E.shape() == (4, 3) and len(E) == 4
    np.testing.assert_array_equal(E.as_array(), table)
    np.testing.assert_array_equal(E[2].npvalue(), table[2])
    np.testing.assert_array_equal(dy.lookup(E, 1).npvalue(), table[1])
    b = dy.lookup_batch(E, [3, 0, 3])
    assert b.dim() == ((3,), 3)
    np.testing.assert_array_equal(b.npvalue(), table[[3, 0, 3]].T)
    loss = dy.sum_batches(dy.sum_elems(b)) + dy.sum_elems(E[1])
    loss.backward()
    assert sorted(E.touched_rows()) == [0, 1, 3]
    np.testing.assert_array_equal(E.grad_as_array()[:, 0], [1.0, 1.0, 0.0, 2.0])
    np.testing.assert_array_equal(E.rows_as_array([1, 3]), table[[1, 3]])
    np.testing.assert_array_equal(E.row_grad_as_array(3), [2.0, 2.0, 2.0])
    assert E.dim() == ((3, 4), 1)  # the whole table as an expression: (d, N)
    with pytest.raises(IndexError, match="row 4"):
        E[4]
    with pytest.raises(IndexError):
        dy.lookup_batch(E, [0, -1])
    with pytest.raises(TypeError):
        E["a"]
    with pytest.raises(RuntimeError):
        E.scalar_value()
    c = dy.lookup(E, 2, update=False)
    dy.renew_cg()
    m2 = dy.ParameterCollection()
    F = m2.add_lookup_parameters((4, 3), init=table)
    dy.sum_elems(dy.lookup(F, 2, update=False)).backward()
    assert not F.grad_as_array().any() and len(F.touched_rows()) == 0
    del c


def test_lookup_set_changes_row():
    m = dy.ParameterCollection()
    E = m.add_lookup_parameters((3, 2), init=np.arange(6.0).reshape(3, 2))
    e = E[0]
    y = e * 2.0
    assert y.vec_value() == [0.0, 2.0]
    e.set(2)
    assert y.vec_value() == [8.0, 10.0]
    eb = E.batch([0, 1])
    eb.set([2, 2])
    assert eb.vec_value() == [4.0, 5.0, 4.0, 5.0]


def test_init_row_and_from_array():
    m = dy.ParameterCollection()
    E = m.add_lookup_parameters((3, 2), init=0.0)
    E.init_row(1, [1.0, 2.0])
    np.testing.assert_array_equal(E.as_array(), [[0, 0], [1, 2], [0, 0]])
    E.init_from_array(np.ones((2, 2)))
    np.testing.assert_array_equal(E.as_array(), [[1, 1], [1, 1], [0, 0]])
    with pytest.raises(ValueError):
        E.init_from_array(np.ones((4, 2)))
    V = m.add_lookup_parameters(5)
    assert V.shape() == (5, 1)


def test_adding_parameters_mid_graph_moves_nothing_it_should_not():
    m = dy.ParameterCollection()
    p = m.add_parameters((3,), init=1.0)
    y = p * 2.0
    assert y.vec_value() == [2.0, 2.0, 2.0]
    big = [m.add_parameters((100, 100)) for _ in range(30)]  # the pool grows (relocates)
    z = y + p
    assert z.vec_value() == [3.0, 3.0, 3.0]
    dy.sum_elems(z).backward()
    np.testing.assert_array_equal(p.grad_as_array(), [3.0, 3.0, 3.0])
    assert len(big) == 30


def test_parameters_survive_collection_deletion():
    m = dy.ParameterCollection()
    p = m.add_parameters((2,), init=3.0)
    del m
    assert p.vec_value() == [3.0, 3.0]


# ---------------------------------------------------------------- bad input


HUGE = 2**64 + 1


@pytest.mark.parametrize("make", ["add_parameters", "add_lookup_parameters"])
@pytest.mark.parametrize(
    "dim,exc",
    [
        ((2.9, 3), TypeError),  # was silently (2, 3)
        (2.9, TypeError),
        ((True, 3), TypeError),
        ((float("nan"), 3), TypeError),
        ((float("inf"),), TypeError),
        (None, TypeError),
        ("23", TypeError),
        ((), TypeError),
        (np.array([2, 3]), TypeError),
        ((0, 3), ValueError),
        ((-1, 3), ValueError),
        ((HUGE,), ValueError),
        ((100000, 100000), ValueError),  # more elements than a tensor may hold: refused before allocating
        ((1,) * 8, ValueError),
    ],
)
def test_parameter_dims_must_be_positive_integers(make, dim, exc):
    m = dy.ParameterCollection()
    with pytest.raises(exc, match="^%s: " % make):
        getattr(m, make)(dim)
    assert m.parameters_list() == [] and m.lookup_parameters_list() == []


def test_integral_float_dims_as_dy_zeros():
    m = dy.ParameterCollection()
    assert m.add_parameters((2.0, 3)).shape() == (2, 3) == dy.zeros((2.0, 3)).dim()[0]
    assert m.add_parameters(3.0).shape() == (3,)
    assert m.add_lookup_parameters((np.int64(5), 2)).shape() == (5, 2)
    with pytest.raises(TypeError):
        dy.zeros((2.9, 3))


@pytest.mark.parametrize("index", [HUGE, -HUGE, 5, -1, 2**31])
def test_lookup_out_of_range_names_op_index_and_size(index):
    m = dy.ParameterCollection()
    E = m.add_lookup_parameters((5, 3), name="emb")
    pattern = r"^%%s: (index|row) %d is out of range for /emb with 5 rows" % index
    with pytest.raises(IndexError, match=pattern % "lookup"):
        dy.lookup(E, index)
    with pytest.raises(IndexError, match=pattern % "lookup"):
        E[index]
    with pytest.raises(IndexError, match=pattern % "lookup_batch"):
        dy.lookup_batch(E, [0, index])
    with pytest.raises(IndexError, match=pattern % "lookup_batch"):
        E.batch([index])
    with pytest.raises(IndexError, match=r"^init_row: row %d is out of range" % index):
        E.init_row(index, [1.0, 2.0, 3.0])
    assert dy.lookup(E, 4).dim() == ((3,), 1)


@pytest.mark.parametrize("index", [None, "1", 1.0, True, np.array([1, 2])])
def test_lookup_index_must_be_an_integer(index):
    m = dy.ParameterCollection()
    E = m.add_lookup_parameters((5, 3))
    for name, call in [
        ("lookup", lambda: dy.lookup(E, index)),
        ("lookup_batch", lambda: dy.lookup_batch(E, [index])),
        ("lookup_batch", lambda: E.batch([0, index])),
        ("init_row", lambda: E.init_row(index, [1.0, 2.0, 3.0])),
        ("rows_as_array", lambda: E.rows_as_array([index])),
    ]:
        with pytest.raises(TypeError, match="^%s: .*must be an integer" % name):
            call()
    with pytest.raises(TypeError, match="^lookup_batch: indices must be a list"):
        dy.lookup_batch(E, 3)
    assert dy.lookup_batch(E, np.array([4, 0])).dim() == ((3,), 2)


@pytest.mark.parametrize(
    "bad,dtype",
    [
        (np.full((2, 3), 1 + 2j), "complex128"),
        (np.array([[None, 1, 2], [3, 4, 5]], dtype=object), "object"),
        (np.array([["a", "b", "c"], ["d", "e", "f"]]), "<U1"),
        ([[1.0, 2.0, 3j], [1, 2, 3]], "complex128"),
    ],
)
def test_parameter_values_must_be_real(bad, dtype):
    m = dy.ParameterCollection()
    P = m.add_parameters((2, 3), init=0.0)
    E = m.add_lookup_parameters((2, 3), init=0.0)
    dt = dtype.replace("<", ".")
    for name, call in [
        ("set_value", lambda: P.set_value(bad)),
        ("set_value", lambda: E.set_value(bad)),
        ("init_from_array", lambda: E.init_from_array(bad)),
        ("init_row", lambda: E.init_row(0, np.asarray(bad)[0])),
        ("parameters_from_numpy", lambda: m.parameters_from_numpy(bad)),
        ("parameters_from_numpy", lambda: m.add_parameters((2, 3), init=np.asarray(bad))),
        ("lookup_parameters_from_numpy", lambda: m.lookup_parameters_from_numpy(bad)),
        ("NumpyInitializer", lambda: dy.NumpyInitializer(bad)),
    ]:
        with pytest.raises(TypeError, match="^%s: .*must be real numbers.*%s" % (name, dt)):
            call()
    assert not P.as_array().any() and not E.as_array().any()  # nothing was written


def test_parameter_values_none_and_strings():
    m = dy.ParameterCollection()
    P = m.add_parameters((2,), init=0.0)
    E = m.add_lookup_parameters((2, 2), init=0.0)
    for bad in (None, "ab"):
        with pytest.raises(TypeError, match="^set_value: "):
            P.set_value(bad)
        with pytest.raises(TypeError, match="^init_row: "):
            E.init_row(0, bad)
        with pytest.raises(TypeError, match="^init_from_array: "):
            E.init_from_array(bad)
        with pytest.raises(TypeError, match="^lookup_parameters_from_numpy: "):
            m.lookup_parameters_from_numpy(bad)
    with pytest.raises(ValueError, match="^lookup_parameters_from_numpy: "):
        m.lookup_parameters_from_numpy(np.array(3.0))
    P.set_value([True, False])  # bools and ints are real numbers
    assert P.as_array().tolist() == [1.0, 0.0]
