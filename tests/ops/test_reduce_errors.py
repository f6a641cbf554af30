"""Bad inputs to the reductions raise at creation, name the op (and the Dim for
out-of-range dims), and leave the graph usable; plus DyNet's documented quirks
(ignored n, tie-breaking, result shapes) that the generated tests do not see."""

import numpy as np
import pytest

import dyn as dy


def _m():
    return dy.inputTensor(np.arange(12.0).reshape(3, 4))


def _t():
    return dy.inputTensor(np.arange(24.0).reshape(2, 3, 4))


def _v(n=3):
    return dy.inputVector(list(range(n)))


CASES = [
    # the *_dim moments: d is a real list of dims in range, no repeats
    ("sum_dim", lambda: dy.sum_dim(_m(), (0,)), TypeError),
    ("sum_dim", lambda: dy.sum_dim(_m(), 0), TypeError),
    ("sum_dim", lambda: dy.sum_dim(_m(), [0.0]), TypeError),
    ("sum_dim", lambda: dy.sum_dim(_m(), ["a"]), TypeError),
    ("sum_dim", lambda: dy.sum_dim(_m(), [2]), ValueError),
    ("sum_dim", lambda: dy.sum_dim(_m(), [-1]), ValueError),
    ("sum_dim", lambda: dy.sum_dim(_m(), [0, 0]), ValueError),
    ("sum_dim", lambda: dy.sum_dim(_m(), []), ValueError),
    ("sum_dim", lambda: dy.sum_dim(np.ones(3), [0]), TypeError),
    ("mean_dim", lambda: dy.mean_dim(_m(), [0]), TypeError),
    ("mean_dim", lambda: dy.mean_dim(_m(), (1,), False), TypeError),
    ("mean_dim", lambda: dy.mean_dim(_t(), [3], True), ValueError),
    ("mean_dim", lambda: dy.mean_dim(_m(), [0], False, -1), ValueError),
    ("mean_dim", lambda: dy.mean_dim(_m(), [0], False, 1.5), TypeError),
    ("std_dim", lambda: dy.std_dim(_m(), range(1), False), TypeError),
    ("std_dim", lambda: dy.std_dim(_v(), [1], False), ValueError),
    ("std_dim", lambda: dy.std_dim(_m(), [], False), ValueError),
    ("moment_dim", lambda: dy.moment_dim(_m(), [0], 0, False), ValueError),
    ("moment_dim", lambda: dy.moment_dim(_m(), [0], -2, False), ValueError),
    ("moment_dim", lambda: dy.moment_dim(_m(), [0], 2.0, False), TypeError),
    ("moment_dim", lambda: dy.moment_dim(_m(), [5], 2, False), ValueError),
    # along one dim
    ("max_dim", lambda: dy.max_dim(_m(), 2), ValueError),
    ("max_dim", lambda: dy.max_dim(_m(), -1), ValueError),
    ("max_dim", lambda: dy.max_dim(_m(), 1.0), TypeError),
    ("max_dim", lambda: dy.max_dim(_m(), [0]), TypeError),
    ("max_dim", lambda: dy.max_dim("x"), TypeError),
    ("min_dim", lambda: dy.min_dim(_v(), 1), ValueError),
    ("min_dim", lambda: dy.min_dim(_m(), "0"), TypeError),
    ("logsumexp_dim", lambda: dy.logsumexp_dim(_m(), 2), ValueError),
    ("logsumexp_dim", lambda: dy.logsumexp_dim(_m(), None), TypeError),
    ("cumsum", lambda: dy.cumsum(_m(), 2), ValueError),
    ("cumsum", lambda: dy.cumsum(_m(), -1), ValueError),
    ("cumsum", lambda: dy.cumsum([_m()]), TypeError),
    # whole elements / batches
    ("mean_elems", lambda: dy.mean_elems(3.0), TypeError),
    ("std_elems", lambda: dy.std_elems([_m()]), TypeError),
    ("moment_elems", lambda: dy.moment_elems(_m(), 0), ValueError),
    ("moment_elems", lambda: dy.moment_elems(_m(), "2"), TypeError),
    ("mean_batches", lambda: dy.mean_batches(None), TypeError),
    ("std_batches", lambda: dy.std_batches(1), TypeError),
    ("moment_batches", lambda: dy.moment_batches(_m(), 0), ValueError),
    # fold_rows / kmax_pooling
    ("fold_rows", lambda: dy.fold_rows(_m(), 0), ValueError),
    ("fold_rows", lambda: dy.fold_rows(_m(), 2), ValueError),
    ("fold_rows", lambda: dy.fold_rows(_t(), 2), ValueError),
    ("fold_rows", lambda: dy.fold_rows(_m(), 1.0), TypeError),
    ("kmax_pooling", lambda: dy.kmax_pooling(_m(), 0), ValueError),
    ("kmax_pooling", lambda: dy.kmax_pooling(_m(), 5), ValueError),
    ("kmax_pooling", lambda: dy.kmax_pooling(_m(), 2, 2), ValueError),
    ("kmax_pooling", lambda: dy.kmax_pooling(_v(), 2), ValueError),
    ("kmax_pooling", lambda: dy.kmax_pooling(_m(), 1.5), TypeError),
]


@pytest.mark.parametrize("name,make,exc", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_bad_input_raises_and_graph_survives(name, make, exc):
    with pytest.raises(exc, match=name):
        make()
    y = dy.sum_dim(_m(), [1])
    assert np.allclose(y.npvalue(), [6.0, 22.0, 38.0])


@pytest.mark.parametrize(
    "make",
    [
        lambda: dy.sum_dim(_m(), [2]),
        lambda: dy.max_dim(_m(), 3),
        lambda: dy.cumsum(_m(), 5),
        lambda: dy.kmax_pooling(_m(), 2, 4),
    ],
)
def test_out_of_range_names_the_dim(make):
    with pytest.raises(ValueError, match=r"\{3,4\}"):
        make()


def test_ignored_and_overriding_n():
    x = _m()
    a = np.arange(12.0).reshape(3, 4)
    assert np.allclose(dy.sum_dim(x, [1], False, 7).npvalue(), a.sum(1))
    assert np.allclose(dy.std_dim(x, [1], False, 7).npvalue(), a.std(1))
    assert np.allclose(dy.mean_dim(x, [1], False, 8).npvalue(), a.sum(1) / 8)
    assert np.allclose(dy.moment_dim(x, [1], 2, False, 2).npvalue(), (a**2).sum(1) / 2)


def test_result_shapes():
    b = dy.inputTensor(np.ones((3, 4, 2)), batched=True)
    assert dy.sum_dim(b, [0, 1]).dim() == ((1,), 2)
    assert dy.sum_dim(b, [0], True).dim() == ((4,), 1)
    assert dy.sum_dim(b, [], True).dim() == ((3, 4), 1)
    assert dy.max_dim(_v()).dim() == ((1,), 1)
    assert dy.mean_elems(b).dim() == ((1,), 2)
    assert dy.std_batches(b).dim() == ((3, 4), 1)
    assert dy.fold_rows(dy.inputVector([1.0, 2.0, 3.0, 4.0])).dim() == ((2, 1), 1)
    assert dy.kmax_pooling(_t(), 2, 2).dim() == ((2, 3, 2), 1)


@pytest.mark.parametrize("mn", [False, True])
def test_max_min_ties_go_to_the_first(mn):
    x = dy.inputTensor(np.array([[1.0, 3.0, 3.0], [0.0, 0.0, 2.0]]))
    y = dy.min_dim(x, 1) if mn else dy.max_dim(x, 1)
    dy.sum_elems(y).backward(full=True)
    want = [[1, 0, 0], [1, 0, 0]] if mn else [[0, 1, 0], [0, 0, 1]]
    assert np.array_equal(x.gradient(), want)


def test_float32_accumulates_in_double():
    dy.renew_cg()
    a = (np.random.RandomState(0).randn(200, 5) + 1e3).astype(np.float32)
    x = dy.inputTensor(a)
    want = a.astype(np.float64)
    assert np.allclose(dy.std_dim(x, [0], False).npvalue(), want.std(0), rtol=1e-5)
    assert np.allclose(dy.mean_dim(x, [0], False).npvalue(), want.mean(0), rtol=1e-7)
    assert np.allclose(dy.cumsum(x).npvalue()[-1], want.sum(0), rtol=1e-7)
    assert np.allclose(dy.logsumexp_dim(x, 1).npvalue(), np.log(np.exp(want - 1e3).sum(1)) + 1e3, rtol=1e-7)


def test_logsumexp_dim_is_stable():
    x = dy.inputTensor(np.array([[1000.0, -1000.0], [1000.0, -np.inf]]))
    assert np.allclose(dy.logsumexp_dim(x, 0).npvalue(), [1000 + np.log(2), -1000])
