"""Bad arguments to the nonlinearity, softmax and dropout ops raise at creation,
naming the op, and leave the graph usable; plus the behaviours the generated
tests cannot see (restricted log_softmax gradient, stability at large inputs)."""

import numpy as np
import pytest

import dyn as dy
from dyn._core.core import graph as _graph


def _still_usable(n_before):
    assert _graph.num_nodes() == n_before, "a failed call left a node behind"
    x = dy.inputVector([1.0, 2.0])
    assert dy.softmax(x).npvalue().sum() == pytest.approx(1.0)


def _raises(exc, match, fn, *args, **kwargs):
    n = _graph.num_nodes()
    with pytest.raises(exc, match=match):
        fn(*args, **kwargs)
    _still_usable(n)


@pytest.mark.parametrize("name", ["tanh", "logistic", "rectify", "exp", "log", "softmax", "log_softmax",
                                  "nobackprop"])
def test_unary_rejects_non_expressions(name):
    _raises(TypeError, name, getattr(dy, name), np.ones(3))


def test_softmax_errors():
    x3 = dy.inputTensor(np.zeros((2, 3, 4)))
    _raises(ValueError, r"softmax: .*at most 2 dimensions.*\{2,3,4\}", dy.softmax, x3)
    _raises(ValueError, r"log_softmax: .*at most 2 dimensions", dy.log_softmax, x3)
    x = dy.inputTensor(np.zeros((2, 3)))
    _raises(ValueError, "softmax: d must be 0", dy.softmax, x, 2)
    _raises(ValueError, "softmax: d must be 0", dy.softmax, x, -1)
    _raises(TypeError, "softmax: d must be an integer", dy.softmax, x, 0.5)


def test_log_softmax_restrict_errors():
    x = dy.inputVector([1.0, 2.0, 3.0])
    _raises(TypeError, "log_softmax: restrict must be a list", dy.log_softmax, x, (0, 1))
    _raises(ValueError, "log_softmax: restrict is an empty list", dy.log_softmax, x, [])
    _raises(IndexError, "log_softmax: restrict index 3 out of range", dy.log_softmax, x, [0, 3])
    _raises(IndexError, "log_softmax", dy.log_softmax, x, [-1])
    _raises(TypeError, "log_softmax: indices must be integers", dy.log_softmax, x, [0.5])
    m = dy.inputTensor(np.zeros((3, 2)))
    _raises(ValueError, "log_softmax: with restrict.*vector", dy.log_softmax, m, [0])
    xb = dy.inputTensor(np.zeros((3, 2)), batched=True)
    _raises(ValueError, "log_softmax: with restrict.*unbatched", dy.log_softmax, xb, [0])


def test_log_softmax_restrict_value_and_gradient(float64):
    x = dy.inputVector([0.5, -1.0, 2.0, 0.0])
    y = dy.log_softmax(x, restrict=[2, 0, 2])  # a set: the repeated 2 counts once
    keep = np.array([0.5, 2.0])
    want = keep - np.log(np.exp(keep).sum())
    v = y.npvalue()
    np.testing.assert_allclose(v[[0, 2]], want, rtol=1e-12)
    assert np.all(np.isneginf(v[[1, 3]]))
    # d(y_0 + 2 y_2)/dx through a row-vector product: its value is NaN (0 * -inf)
    # but backward only needs the weights: restricted entries get
    # g - softmax * sum(g), the others nothing
    loss = dy.inputTensor(np.array([[1.0, 0.0, 2.0, 0.0]])) * y
    loss.backward(full=True)
    p = np.exp(want)
    want_g = np.zeros(4)
    want_g[[0, 2]] = np.array([1.0, 2.0]) - p * 3.0
    np.testing.assert_allclose(x.gradient(), want_g, rtol=1e-10, atol=1e-12)


def test_logsumexp_errors():
    x = dy.inputVector([1.0, 2.0])
    _raises(TypeError, "logsumexp: expected a list", dy.logsumexp, (x, x))
    _raises(ValueError, "logsumexp: empty list", dy.logsumexp, [])
    _raises(ValueError, r"logsumexp: .*same dimensions.*\{2\}, \{3\}", dy.logsumexp,
            [x, dy.inputVector([1.0, 2.0, 3.0])])
    _raises(TypeError, "logsumexp", dy.logsumexp, [x, 1.0])
    a = dy.inputTensor(np.zeros((2, 2)), batched=True)
    b = dy.inputTensor(np.zeros((2, 3)), batched=True)
    _raises(ValueError, "logsumexp: batch sizes differ", dy.logsumexp, [a, b])


def test_pickneglogsoftmax_errors():
    x = dy.inputVector([1.0, 2.0, 3.0])
    _raises(IndexError, r"pickneglogsoftmax: index 3 out of range.*\{3\}", dy.pickneglogsoftmax, x, 3)
    _raises(IndexError, "pickneglogsoftmax", dy.pickneglogsoftmax, x, -1)
    _raises(TypeError, "pickneglogsoftmax: indices must be integers", dy.pickneglogsoftmax, x, 1.0)
    m = dy.inputTensor(np.zeros((3, 2)))
    _raises(ValueError, "pickneglogsoftmax: x must be a vector", dy.pickneglogsoftmax, m, 0)
    xb = dy.inputTensor(np.zeros((3, 2)), batched=True)
    _raises(ValueError, "pickneglogsoftmax: x is batched.*pickneglogsoftmax_batch", dy.pickneglogsoftmax,
            xb, 0)
    _raises(TypeError, "pickneglogsoftmax: expected an Expression", dy.pickneglogsoftmax, [1.0], 0)


def test_pickneglogsoftmax_batch_errors():
    xb = dy.inputTensor(np.zeros((3, 2)), batched=True)
    _raises(ValueError, "pickneglogsoftmax_batch: 3 indices for x of batch size 2",
            dy.pickneglogsoftmax_batch, xb, [0, 1, 2])
    _raises(ValueError, "pickneglogsoftmax_batch: 1 indices", dy.pickneglogsoftmax_batch, xb, [0])
    _raises(ValueError, "pickneglogsoftmax_batch: vs is empty", dy.pickneglogsoftmax_batch, xb, [])
    _raises(IndexError, "pickneglogsoftmax_batch: index 3 out of range", dy.pickneglogsoftmax_batch, xb,
            [0, 3])
    _raises(TypeError, "pickneglogsoftmax_batch: vs must be a sequence", dy.pickneglogsoftmax_batch, xb, 1)
    m = dy.inputTensor(np.zeros((3, 2, 2)), batched=True)
    _raises(ValueError, "pickneglogsoftmax_batch: x must be a vector", dy.pickneglogsoftmax_batch, m, [0, 1])


def test_pickneglogsoftmax_batch_accepts_iterables():
    xb = dy.inputTensor(np.arange(6.0).reshape(3, 2), batched=True)
    a = dy.pickneglogsoftmax_batch(xb, np.array([0, 2])).npvalue()
    b = dy.pickneglogsoftmax_batch(xb, range(2)).npvalue()
    assert a.shape == b.shape == (1, 2)
    assert a[0, 0] == b[0, 0]


def test_dropout_and_noise_errors():
    x = dy.inputVector([1.0, 2.0])
    _raises(ValueError, r"dropout: p must be in \[0, 1\]", dy.dropout, x, 1.5)
    _raises(ValueError, r"dropout: p must be in \[0, 1\]", dy.dropout, x, -0.1)
    _raises(ValueError, r"dropout: p must be in \[0, 1\]", dy.dropout, x, float("nan"))
    _raises(TypeError, "dropout: p must be a number", dy.dropout, x, "half")
    _raises(TypeError, "dropout: expected an Expression", dy.dropout, 3.0, 0.5)
    _raises(ValueError, "noise: stddev must be >= 0", dy.noise, x, -1.0)
    _raises(TypeError, "noise: stddev must be a number", dy.noise, x, None)


def test_softmax_family_is_stable_at_large_inputs():
    # float32 graph: exp(1000) overflows unless the max is subtracted
    big = np.array([1000.0, 999.0, -1000.0])
    want = np.exp(big - big.max()) / np.exp(big - big.max()).sum()
    x = dy.inputVector(big)
    np.testing.assert_allclose(dy.softmax(x).npvalue(), want, rtol=1e-5, atol=1e-30)
    np.testing.assert_allclose(dy.log_softmax(x).npvalue()[:2], np.log(want[:2]), rtol=1e-5)
    assert dy.pickneglogsoftmax(x, 0).scalar_value() == pytest.approx(-np.log(want[0]), rel=1e-4)
    assert dy.logsumexp([dy.scalarInput(1000.0), dy.scalarInput(1000.0)]).scalar_value() == pytest.approx(
        1000.0 + np.log(2.0))
    ninf = dy.scalarInput(-np.inf)
    assert dy.logsumexp([ninf, ninf]).scalar_value() == -np.inf  # log 0, not NaN
    assert np.all(np.isfinite(dy.logistic(dy.inputVector([-1000.0, 1000.0])).npvalue()))


def test_unary_edge_gradients(float64):
    x = dy.inputVector([0.0, -1.0, 2.0])
    dy.sum_elems(dy.rectify(x)).backward(full=True)
    np.testing.assert_array_equal(x.gradient(), [0.0, 0.0, 1.0])  # the gradient at 0 is 0


def test_softmax_rows_of_a_matrix(float64):
    a = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 5.0]])
    y = dy.softmax(dy.inputTensor(a), d=1).npvalue()
    np.testing.assert_allclose(y.sum(axis=1), [1.0, 1.0])
    np.testing.assert_allclose(y[1], np.exp(a[1]) / np.exp(a[1]).sum())
