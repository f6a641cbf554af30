"""The matrix product takes different code paths by size (our small-matrix
loops up to 64x64, BLAS beyond, our own kernels for float32 products with one
small side; gemv/ger for one column, gemm otherwise):
check every path, in float32 and float64, against numpy."""

import numpy as np
import pytest

import dyn as dy

SHAPES = [
    (1, 1, 1),
    (3, 5, 1),
    (17, 13, 1),
    (32, 32, 1),
    (64, 64, 1),
    (65, 64, 1),
    (100, 70, 1),
    (7, 9, 3),
    (64, 64, 5),
    (130, 40, 2),
    # float32 products with one small side past dyn's thresholds run through its own kernels
    # (dyn/_core/cpu/_skinnygemm.h): forward A B, backward A^T B (tests/test_skinny_gemm.py)
    (1030, 260, 5),
    (4100, 260, 3),
    (300, 230, 20),
]


@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_matmul_value_and_gradients(m, k, n, precision):
    dy.set_precision(precision)
    try:
        rng = np.random.RandomState(m * 1000 + k * 10 + n)
        W, x, r = rng.randn(m, k), rng.randn(k, n) if n > 1 else rng.randn(k), rng.randn(m, n)
        r = r if n > 1 else r[:, 0]
        We, xe = dy.inputTensor(W), dy.inputTensor(x)
        y = We * xe
        loss = dy.sum_elems(dy.cmult(y, dy.inputTensor(r)))
        loss.backward(full=True)
        tol = 2e-5 if precision == "float32" else 1e-12
        scale = np.sqrt(k)
        np.testing.assert_allclose(y.npvalue(), W @ x, rtol=tol, atol=tol * scale)
        rx = r if n > 1 else r[:, None]
        xx = x if n > 1 else x[:, None]
        np.testing.assert_allclose(We.gradient(), rx @ xx.T, rtol=tol, atol=tol * scale)
        np.testing.assert_allclose(xe.gradient(), (W.T @ rx).reshape(x.shape), rtol=tol, atol=tol * scale)
    finally:
        dy.set_precision("float32")


def test_affine_transform_accumulates_into_bias_row_of_batch():
    rng = np.random.RandomState(0)
    W, b = rng.randn(40, 30), rng.randn(40)
    X = rng.randn(30, 6)
    y = dy.affine_transform([dy.inputTensor(b), dy.inputTensor(W), dy.inputTensor(X, batched=True)])
    np.testing.assert_allclose(y.npvalue(), W @ X + b[:, None], rtol=2e-5, atol=1e-4)
