"""Hostile arguments to every registered operation: each raises at creation a
TypeError, ValueError or IndexError whose message names the op.

The table is generated from the registry: an op's non-expression arguments
are found from its signature and first test case, their kind (integer, real
number, flag, list of integers, shape tuple, string) from the value the case
gives or the default, and each kind gets its bad values (None, a string, a
float where an integer belongs, a numpy array, a bool, a huge int, ...). Each
expression argument in turn gets None, a string and a numpy array.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import dyn as dy
from dyn._core.core import graph as _graph
from dyn.ops._registry import REGISTRY
from tests.ops import _harness as H

HUGE = 2**64 + 1
TYPE, VALUE, RANGE = TypeError, ValueError, IndexError
ANY = (TypeError, ValueError, IndexError)

# kind -> [(label, bad value, the exceptions that may answer it)]
BAD = {
    "int": [
        ("None", None, TYPE),
        ("str", "1", TYPE),
        ("float", 1.5, TYPE),
        ("ndarray", np.array([1, 2]), TYPE),
        ("bool", True, TYPE),
        ("complex", 1j, TYPE),
        ("huge", HUGE, (ValueError, IndexError)),
        ("-huge", -HUGE, (ValueError, IndexError)),
    ],
    "float": [
        ("None", None, TYPE),
        ("str", "0.5", TYPE),
        ("ndarray", np.array([0.5, 0.5]), TYPE),
        ("bool", True, TYPE),
        ("complex", 0.5j, TYPE),
        ("list", [0.5], TYPE),
    ],
    "bool": [
        ("None", None, TYPE),
        ("str", "False", TYPE),
        ("float", 0.5, TYPE),
        ("ndarray", np.array([True, False]), TYPE),
    ],
    # "... entry": the first entry of the case's own list replaced
    "ints": [
        ("None", None, TYPE),
        ("str", "01", TYPE),
        ("float", 1.5, TYPE),
        ("float entry", 1.5, TYPE),
        ("None entry", None, TYPE),
        ("bool entry", True, TYPE),
        ("huge entry", HUGE, (ValueError, IndexError)),
    ],
    "shape": [
        ("None", None, TYPE),
        ("str", "3", TYPE),
        ("float entry", 2.5, TYPE),
        ("bool entry", True, TYPE),
        ("huge entry", HUGE, VALUE),
        ("negative entry", -3, VALUE),
    ],
    "str": [
        ("None", None, ANY),
        ("float", 1.5, ANY),
        ("ndarray", np.array(["a", "b"]), ANY),
    ],
}

# Values that are right after all: a huge count, an ignored argument, a step
# past the end (x[0:6:2**64] is one element in numpy too).
ALLOWED = {
    ("poisson_loss", "x", "huge"),
    ("std_dim", "n", "huge"),
    ("std_dim", "n", "-huge"),
    ("strided_select", "strides", "huge entry"),
}


def _kind(value):
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, tuple):
        return "shape"
    if isinstance(value, (list, range, np.ndarray)):
        return "ints"
    return None


def _call_args(spec):
    """(number of expression arguments, {name: value} of the rest) for the first case."""
    case = spec.cases[0]
    kwargs = case.kwargs_for(1)
    n_expr = 1 if spec.list_input else len(case.shapes)
    params = list(inspect.signature(spec.fn).parameters.values())
    rest = {}
    positional = 0
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            continue
        if p.kind is p.POSITIONAL_OR_KEYWORD and positional < n_expr:
            positional += 1
            continue
        if p.name in kwargs:
            rest[p.name] = kwargs[p.name]
        elif p.default is not inspect.Parameter.empty and p.default is not None:
            rest[p.name] = p.default
    return n_expr, rest


def _table():
    rows = []
    for name in sorted(REGISTRY):
        if not name.isidentifier():
            continue  # operators: Python's own TypeError for unsupported operands
        _, rest = _call_args(REGISTRY[name])
        for arg, value in rest.items():
            for label, bad, exc in BAD.get(_kind(value), []):
                if (name, arg, label) in ALLOWED:
                    continue
                if label.endswith(" entry"):
                    if len(value) == 0:
                        continue
                    bad = type(value)([bad, *list(value)[1:]])
                rows.append((name, arg, label, bad, exc))
    return rows


def _build(spec, replace=None):
    """The op on its first case's inputs, with replace = (argument, value) swapped in."""
    case = spec.cases[0]
    arrays, bds = H.make_arrays(spec, case, ("none", 0), 0)
    xs = [dy.inputTensor(a) for a in arrays]
    kwargs = case.kwargs_for(1)
    if replace is not None:
        what, value = replace
        if what.startswith("arg") and what[3:].isdigit():
            xs[int(what[3:])] = value
        else:
            kwargs[what] = value
    return spec.fn(list(xs), **kwargs) if spec.list_input else spec.fn(*xs, **kwargs)


def _check(name, what, label, bad, exc):
    spec = REGISTRY[name]
    dy.renew_cg()
    before = _graph.num_nodes()
    with pytest.raises(exc) as info:
        _build(spec, (what, bad))
    assert name in str(info.value), "%s(%s=%s): the message does not name the op: %s" % (
        name,
        what,
        label,
        info.value,
    )
    # inputs were made before the bad call; the failed call itself leaves nothing behind
    n_inputs = len(spec.cases[0].shapes)
    assert _graph.num_nodes() <= before + n_inputs
    _build(spec)  # the graph is still usable


TABLE = _table()


@pytest.mark.parametrize(
    "name,what,label,bad,exc", TABLE, ids=["%s-%s-%s" % (r[0], r[1], r[2]) for r in TABLE]
)
def test_bad_argument(name, what, label, bad, exc):
    _check(name, what, label, bad, exc)


def test_table_covers_every_op_with_arguments():
    # every op with a non-expression argument of a known kind is probed
    covered = {r[0] for r in TABLE}
    for name, spec in REGISTRY.items():
        if not name.isidentifier():
            continue
        _, rest = _call_args(spec)
        kinds = {_kind(v) for v in rest.values()} - {None}
        assert not kinds or name in covered, name
    assert {"pick_range", "pickrange", "strided_select", "select_cols", "pick", "dropout"} <= covered


# expression arguments that may be None: optional inputs of the tree and LSTM ops
NONE_OK = {
    ("child_sum_tree_lstm", 0),
    ("nary_tree_lstm", 0),
    ("tree_rnn", 0),
    ("lstm_step", 1),  # prev and Wh: both None on a first step (one alone is a ValueError)
    ("lstm_step", 2),
    ("lstm_step_dropout", 1),
    ("lstm_step_dropout", 2),
    ("lstm_step_dropout", 3),
    ("lstm_step_dropout", 4),
    ("conv2d_bias", 2),
}


def _expr_table():
    rows = []
    for name in sorted(REGISTRY):
        spec = REGISTRY[name]
        if not name.isidentifier() or spec.list_input:
            continue
        for k in range(len(spec.cases[0].shapes)):
            for label, bad in (("None", None), ("str", "x"), ("ndarray", np.ones(3))):
                if label == "None" and (name, k) in NONE_OK:
                    continue
                rows.append((name, "arg%d" % k, label, bad, TypeError))
    return rows


EXPR_TABLE = _expr_table()


@pytest.mark.parametrize("name,what,label,bad,exc", EXPR_TABLE, ids=["%s-%s-%s" % r[:3] for r in EXPR_TABLE])
def test_bad_expression_argument(name, what, label, bad, exc):
    _check(name, what, label, bad, exc)


LIST_OPS = sorted(n for n, s in REGISTRY.items() if s.list_input)


@pytest.mark.parametrize("name", LIST_OPS)
@pytest.mark.parametrize("bad", [None, "ab", np.ones(3), 1.5], ids=["None", "str", "ndarray", "float"])
def test_bad_list_argument(name, bad):
    spec = REGISTRY[name]
    kwargs = spec.cases[0].kwargs_for(1)
    with pytest.raises(TypeError, match=name):
        spec.fn(bad, **kwargs)
    with pytest.raises(TypeError, match=name):
        spec.fn([dy.inputVector([1.0, 2.0]), bad], **kwargs)


# ---------------------------------------------------------------- cases the probe found


def _m():
    return dy.inputTensor(np.arange(12.0).reshape(3, 4))


@pytest.mark.parametrize("bad", [None, "x", np.ones((3, 4)), 3])
@pytest.mark.parametrize(
    "name,call",
    [
        ("pick_range", lambda x: dy.pick_range(x, 0, 2)),
        ("pickrange", lambda x: dy.pickrange(x, 0, 2)),
        ("strided_select", lambda x: dy.strided_select(x, [1], [0], [2])),
        ("select_cols", lambda x: dy.select_cols(x, [0])),
        ("select_rows", lambda x: dy.select_rows(x, [0])),
        ("pick", lambda x: dy.pick(x, 0)),
        ("pick_batch_elem", lambda x: dy.pick_batch_elem(x, 0)),
    ],
)
def test_selection_of_a_non_expression(name, call, bad):
    with pytest.raises(TypeError, match="^%s: expected an Expression" % name):
        call(bad)


def test_pickrange_names_itself():
    with pytest.raises(IndexError, match="^pickrange: end 9 is out of range for dim 0 of size 3"):
        dy.pickrange(_m(), 0, 9)
    with pytest.raises(TypeError, match="^pickrange: start must be an integer, got bool True"):
        dy.pickrange(_m(), True, 2)
    np.testing.assert_allclose(dy.pickrange(_m(), 1, 3).npvalue(), [[4, 5, 6, 7], [8, 9, 10, 11]])


@pytest.mark.parametrize("index", [HUGE, -HUGE, 2**31])
def test_huge_indices(index):
    x = _m()
    with pytest.raises(IndexError, match="^pick: index %d" % index if index >= 0 else "^pick: index"):
        dy.pick(x, index)
    with pytest.raises(IndexError, match="select_rows"):
        dy.select_rows(x, [0, index])
    with pytest.raises(IndexError, match="pick_batch_elems"):
        dy.pick_batch_elems(x, [index])
    with pytest.raises(IndexError, match="pickneglogsoftmax"):
        dy.pickneglogsoftmax(dy.inputVector([1.0, 2.0]), index)


@pytest.mark.parametrize("d", [True, np.array([0, 1]), 1.0, None])
def test_dim_arguments_are_integers(d):
    x = _m()
    for name, call in [
        ("concatenate", lambda: dy.concatenate([x, x], d)),
        ("pick", lambda: dy.pick(x, 0, d)),
        ("cumsum", lambda: dy.cumsum(x, d)),
        ("max_dim", lambda: dy.max_dim(x, d)),
        ("logsumexp_dim", lambda: dy.logsumexp_dim(x, d)),
        ("dropout_dim", lambda: dy.dropout_dim(x, d, 0.5)),
    ]:
        with pytest.raises(TypeError, match="^%s: d.* must be an integer" % name):
            call()


def test_numpy_integers_still_work():
    x = _m()
    i = np.int64(1)
    np.testing.assert_allclose(dy.pick(x, i, np.int32(1)).npvalue(), [1, 5, 9])
    np.testing.assert_allclose(dy.pick_range(x, np.int64(0), i).npvalue(), [[0, 1, 2, 3]])
    np.testing.assert_allclose(dy.cumsum(dy.inputVector([1, 2, 3]), np.int64(0)).npvalue(), [1, 3, 6])
    np.testing.assert_allclose(dy.select_rows(x, np.array([2, 0])).npvalue()[:, 0], [8, 0])
    np.testing.assert_allclose(
        dy.reshape(x, (np.int64(12),)).npvalue(), np.arange(12.0).reshape(3, 4).ravel("F")
    )
    assert dy.mean_dim(x, [0], np.bool_(False)).dim() == ((4,), 1)
    assert dy.mean_dim(x, [0], 0).dim() == ((4,), 1)
    # the compiled wrappers' checks (dyn/_core/ops/util.pyx int_arg, number_arg, flag_arg) take them too
    assert dy.sum_dim(x, [np.int32(0)], np.bool_(True), np.int64(3)).dim() == ((4,), 1)
    assert dy.sum_dim(x, [1], 1, 0).dim() == ((3,), 1)
    assert dy.softmax(x, np.int64(1)).dim() == ((3, 4), 1)
    assert dy.kmh_ngram(x, np.int64(2)).dim() == ((3, 3), 1)
    assert dy.dropout(x, np.float32(0.5)).dim() == ((3, 4), 1)
    assert dy.dropout(x, 0).dim() == ((3, 4), 1)
    assert dy.noise(x, np.array(0.5)).dim() == ((3, 4), 1)
    np.testing.assert_allclose(
        dy.scalar_affine(x, np.float32(2), 1).npvalue(), np.arange(12.0).reshape(3, 4) * 2 + 1
    )
    assert dy.maxpooling2d(x, [np.int64(2), 2], (2, 2), np.bool_(False)).dim() == ((2, 2), 1)


@pytest.mark.parametrize("s, e, d", [(0, 2, 0), (1, 2, 1), (5, 305, 0), (0, 400, 0), (399, 400, 0)])
def test_pick_range_with_ints_and_numpy_ints_agree(s, e, d):
    """Python ints take the compiled path (the range written straight into the index pool, up to
    400 indices here), numpy ints the checked Python one: the same node either way."""
    data = np.arange(800.0).reshape(400, 2)
    x = dy.inputTensor(data)
    want = np.take(data, range(s, e), axis=d)
    fast, checked = dy.pick_range(x, s, e, d), dy.pick_range(x, np.int64(s), np.int64(e), np.int64(d))
    assert fast.dim() == checked.dim()
    np.testing.assert_array_equal(fast.npvalue(), want.reshape(fast.npvalue().shape))
    np.testing.assert_array_equal(checked.npvalue(), fast.npvalue())
    with pytest.raises(IndexError, match="^pick_range: end %d is out of range for dim %d" % (e + 400, d)):
        dy.pick_range(x, s, e + 400, d)


@pytest.mark.parametrize(
    "data,dtype",
    [
        (np.ones(3) * (1 + 2j), "complex128"),
        ([1.0, 2j], "complex128"),
        ([1.0, None], "object"),
        (np.array([1.0, None], dtype=object), "object"),
        (["1", "2"], "<U1"),
        (np.array(["a", "b"]), "<U1"),
    ],
)
def test_inputs_refuse_what_is_not_real(data, dtype):
    for name, call in [
        ("inputTensor", lambda: dy.inputTensor(data)),
        ("inputVector", lambda: dy.inputVector(data)),
        ("sparse_inputTensor", lambda: dy.sparse_inputTensor([[0, 1]], data, (3,))),
        ("inputTensorTranspose", lambda: dy.inputTensorTranspose(data)),
    ]:
        with pytest.raises(
            TypeError, match="^%s: .*must be real numbers.*%s" % (name, dtype.replace("<", "."))
        ):
            call()


def test_inputs_take_numbers_held_as_objects():
    x = dy.inputTensor(np.array([1, 2.5, np.float32(3)], dtype=object))
    np.testing.assert_allclose(x.npvalue(), [1, 2.5, 3])
    np.testing.assert_allclose(dy.inputTensor([[True, False]]).npvalue(), [[1, 0]])


@pytest.mark.parametrize(
    "name,call,exc",
    [
        ("scalarInput", lambda: dy.scalarInput(None), TypeError),
        ("scalarInput", lambda: dy.scalarInput(1j), TypeError),
        ("scalarInput", lambda: dy.scalarInput("1"), TypeError),
        ("constant", lambda: dy.constant((2,), 1j), TypeError),
        ("constant", lambda: dy.constant((2,), None), TypeError),
        ("zeros", lambda: dy.zeros((2.9,)), TypeError),
        ("zeros", lambda: dy.zeros((True, 2)), TypeError),
        ("zeros", lambda: dy.zeros((float("nan"),)), TypeError),
        ("zeros", lambda: dy.zeros(float("inf")), TypeError),
        ("zeros", lambda: dy.zeros((HUGE,)), ValueError),
        ("zeros", lambda: dy.zeros((2,), batch_size=2.5), TypeError),
        ("zeros", lambda: dy.zeros((2,), batch_size=True), TypeError),
        ("ones", lambda: dy.ones((2,), batch_size=0), ValueError),
        ("vecInput", lambda: dy.vecInput(2.5), TypeError),
        ("vecInput", lambda: dy.vecInput(None), TypeError),
        ("sparse_inputTensor", lambda: dy.sparse_inputTensor([[0]], [1.0], (3,), defval=None), TypeError),
        ("random_normal", lambda: dy.random_normal((float("nan"),)), TypeError),
        ("random_normal", lambda: dy.random_normal((HUGE,)), ValueError),
        ("random_uniform", lambda: dy.random_uniform(3, True, 1.0), TypeError),
    ],
)
def test_input_arguments(name, call, exc):
    with pytest.raises(exc, match="^%s: " % name):
        call()


def test_integral_float_dims_are_accepted():
    # as DyNet (and dim_from_tuple): 3.0 is the dim 3
    assert dy.zeros((3.0, 2)).dim() == ((3, 2), 1)
    assert dy.vecInput(3.0).dim() == ((3,), 1)
    assert dy.random_normal(np.float64(2.0)).dim() == ((2,), 1)
