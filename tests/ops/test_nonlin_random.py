"""Statistics of the random ops (dropout, noise) and the gradient-flow op
nobackprop: what the generated value/gradient tests cannot check."""

import numpy as np
import pytest

import dyn as dy
from dyn._core.core import graph as _graph

N = 20000  # elements: the kept fraction's std is sqrt(p(1-p)/N) < 0.004


def _ones(shape, batch=1):
    a = np.ones(tuple(shape) + ((batch,) if batch > 1 else ()))
    return dy.inputTensor(a, batched=batch > 1, reusable_expr=True)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_keeps_expected_fraction_scaled(p, float64):
    y = dy.dropout(_ones((N,)), p).npvalue()
    kept = y != 0
    assert abs(kept.mean() - (1 - p)) < 5 * np.sqrt(p * (1 - p) / N)
    np.testing.assert_allclose(y[kept], 1.0 / (1.0 - p), rtol=1e-12)
    assert abs(y.mean() - 1.0) < 5 * np.sqrt(p / (1 - p) / N)  # E[y] = x


def test_dropout_float32_scale():
    y = dy.dropout(_ones((1000,)), 0.25).npvalue()
    np.testing.assert_allclose(y[y != 0], np.float32(1 / 0.75), rtol=1e-6)


def test_dropout_p0_identity_p1_zero(float64):
    x = dy.inputTensor(np.arange(6.0).reshape(2, 3) - 2.5)
    np.testing.assert_array_equal(dy.dropout(x, 0.0).npvalue(), x.npvalue())
    np.testing.assert_array_equal(dy.dropout(x, 1.0).npvalue(), np.zeros((2, 3)))  # zeros, not DyNet's NaN


def test_dropout_masks_differ_per_batch_element(float64):
    y = dy.dropout(_ones((200,), batch=4), 0.5).npvalue()
    masks = y != 0
    assert masks.shape == (200, 4)
    for b in range(1, 4):
        assert (masks[:, 0] != masks[:, b]).any()


def test_dropout_gradient_is_the_mask(float64):
    m = dy.ParameterCollection()
    w = m.add_parameters((50, 3), init=dy.ConstInitializer(2.0))
    y = dy.dropout(w, 0.4)
    r = np.random.RandomState(0).uniform(-1, 1, size=(50, 3))
    loss = dy.sum_elems(dy.cmult(y, dy.inputTensor(r)))
    loss.backward()
    mask = y.npvalue() / 2.0  # the mask the forward pass used: 0 or 1/(1-p)
    assert set(np.unique(mask)) <= {0.0, 1.0 / 0.6}
    g = w.grad_as_array()
    np.testing.assert_allclose(g, r * mask, rtol=1e-12)
    assert np.all(g[mask == 0] == 0)  # nothing flows through dropped entries


def test_dropout_gradient_with_batch(float64):
    x = _ones((30,), batch=3)
    y = dy.dropout(x, 0.5)
    dy.sum_batches(dy.sum_elems(y)).backward(full=True)
    np.testing.assert_array_equal(x.gradient(), y.npvalue())  # x = 1, so y is the mask


def test_same_seed_same_mask(float64):
    _graph.seed(1234)
    a = dy.dropout(_ones((500,)), 0.5).npvalue()
    n1 = dy.noise(_ones((100,)), 1.0).npvalue()
    dy.renew_cg()
    _graph.seed(1234)
    b = dy.dropout(_ones((500,)), 0.5).npvalue()
    n2 = dy.noise(_ones((100,)), 1.0).npvalue()
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(n1, n2)
    dy.renew_cg()
    c = dy.dropout(_ones((500,)), 0.5).npvalue()  # the stream moved on
    assert (a != c).any()


def test_dy_init_seed_fixes_the_mask():
    dy.init(random_seed=77)
    a = dy.dropout(_ones((300,)), 0.3).npvalue()
    dy.renew_cg()
    dy.init(random_seed=77)
    b = dy.dropout(_ones((300,)), 0.3).npvalue()
    np.testing.assert_array_equal(a, b)


def test_noise_mean_and_std(float64):
    x = dy.inputTensor(np.full(N, 3.0))
    e = dy.noise(x, 0.5).npvalue() - 3.0
    assert abs(e.mean()) < 5 * 0.5 / np.sqrt(N)
    assert abs(e.std() - 0.5) < 0.02
    assert np.all(dy.noise(x, 0.0).npvalue() == 3.0)


def test_noise_gradient_is_identity(float64):
    x = _ones((40,), batch=2)
    y = dy.noise(x, 2.0)
    r = np.random.RandomState(1).uniform(-1, 1, size=(40, 2))
    dy.sum_batches(dy.sum_elems(dy.cmult(y, dy.inputTensor(r, batched=True)))).backward(full=True)
    np.testing.assert_allclose(x.gradient(), r, rtol=1e-12)


def test_nobackprop_passes_no_gradient(float64):
    m = dy.ParameterCollection()
    w = m.add_parameters((4,), init=dy.ConstInitializer(1.5))
    v = m.add_parameters((4,), init=dy.ConstInitializer(-1.0))
    y = dy.nobackprop(w)
    np.testing.assert_array_equal(y.npvalue(), np.full(4, 1.5))
    # w needs a gradient, but only reaches the loss through nobackprop
    loss = dy.sum_elems(dy.cmult(y, v))
    loss.backward()
    np.testing.assert_array_equal(w.grad_as_array(), np.zeros(4))
    np.testing.assert_array_equal(v.grad_as_array(), np.full(4, 1.5))  # the other side still gets one
    dy.renew_cg()
    # backward(full=True) visits every node; nobackprop still stops the gradient
    x = dy.inputVector([1.0, 2.0])
    dy.sum_elems(dy.nobackprop(x) + x).backward(full=True)
    np.testing.assert_array_equal(x.gradient(), [1.0, 1.0])
