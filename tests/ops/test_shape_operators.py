"""Expression ** (number or expression), Expression indexing, set_index on
picks, and index lists of numpy ints: values against numpy and float64
finite-difference gradients."""

import numpy as np
import pytest

import dyn as dy

from . import _harness as H


def _grad_check(x, a, y):
    loss = H.loss_of(y, seed=3)
    loss.backward(full=True)
    np.testing.assert_allclose(x.gradient(), H.numeric_grad(x, a, loss), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("c", [2, 3.0, 0.5, -1.5, 0, 1])
def test_pow_number(c, float64):
    a = np.random.RandomState(0).uniform(0.5, 2.0, size=(3, 2))
    x = dy.inputTensor(a, reusable_expr=True)
    y = x**c
    np.testing.assert_allclose(y.npvalue(), a**c, rtol=1e-12)
    _grad_check(x, a, y)


def test_pow_number_negative_base_integer_exponent(float64):
    a = np.array([-1.5, -0.5, 0.7, 2.0])
    x = dy.inputTensor(a, reusable_expr=True)
    y = x**3
    np.testing.assert_allclose(y.npvalue(), a**3)
    _grad_check(x, a, y)


def test_pow_number_batched_float32():
    a = np.random.RandomState(1).uniform(0.5, 2.0, size=(4, 3))
    y = dy.inputTensor(a, batched=True) ** 2.5
    assert y.dim() == ((4,), 3)
    np.testing.assert_allclose(y.npvalue(), a**2.5, rtol=1e-5)


def test_pow_expression_operator(float64):
    a = np.random.RandomState(2).uniform(0.5, 2.0, size=(3,))
    e = dy.scalarInput(1.7)
    y = dy.inputTensor(a) ** e
    np.testing.assert_allclose(y.npvalue(), a**1.7)


def test_int_index_and_negative(float64):
    a = np.arange(12.0).reshape(3, 4)
    x = dy.inputTensor(a, reusable_expr=True)
    np.testing.assert_allclose(x[1].npvalue(), a[1])
    np.testing.assert_allclose(x[-1].npvalue(), a[-1])
    np.testing.assert_allclose(x[np.int64(2)].npvalue(), a[2])
    _grad_check(x, a, x[-2])


def test_iteration_stops_at_index_error():
    v = dy.inputVector([1.0, 2.0, 3.0])
    assert [float(e.scalar_value()) for e in v] == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("sl", [slice(1, 3), slice(None, None, 2), slice(-2, None), slice(0, 10, 3)])
def test_slice_rows(sl, float64):
    a = np.random.RandomState(4).uniform(-1, 1, size=(5, 3))
    x = dy.inputTensor(a, reusable_expr=True)
    y = x[sl]
    np.testing.assert_allclose(y.npvalue(), a[sl])
    _grad_check(x, a, y)


def test_tuple_of_slices_and_batch(float64):
    a = np.random.RandomState(5).uniform(-1, 1, size=(4, 5, 3))
    x = dy.inputTensor(a, batched=True, reusable_expr=True)
    y = x[1:4, ::2]
    assert y.dim() == ((3, 3), 3)
    np.testing.assert_allclose(y.npvalue(), a[1:4, ::2])
    _grad_check(x, a, y)
    z = x[:, 1:2, 0:3:2]
    assert z.dim() == ((4, 1), 2)
    np.testing.assert_allclose(z.npvalue(), a[:, 1:2, 0:3:2])
    full = x[:, :]
    assert full is not x and full.dim() == x.dim()


def test_pick_set_index(float64):
    a = np.arange(12.0).reshape(3, 4)
    x = dy.inputTensor(a)
    p = dy.pick(x, 0, 1)
    np.testing.assert_allclose(p.npvalue(), a[:, 0])
    p.set_index(np.int32(3))
    np.testing.assert_allclose(p.npvalue(), a[:, 3])


def test_pick_batch_set_index_and_broadcast(float64):
    a = np.random.RandomState(6).uniform(-1, 1, size=(3, 4))
    x = dy.inputTensor(a, reusable_expr=True)
    p = dy.pick_batch(x, np.array([2, 0, 2]))
    assert p.dim() == ((4,), 3)
    np.testing.assert_allclose(p.npvalue(), a[[2, 0, 2]].T)
    _grad_check(x, a, p)
    p.set_index(range(3))
    np.testing.assert_allclose(p.npvalue(), a.T)


def test_select_rows_repeats_accumulate(float64):
    a = np.random.RandomState(7).uniform(-1, 1, size=(4, 2))
    x = dy.inputTensor(a, reusable_expr=True)
    y = dy.select_rows(x, np.array([1, 1, 3], dtype=np.int64))
    np.testing.assert_allclose(y.npvalue(), a[[1, 1, 3]])
    _grad_check(x, a, y)
