"""Expression operators with numpy operands: scalars work as numbers, arrays are refused.

numpy would otherwise broadcast `x + array` into an object array of Expressions (each x + a
number), which only fails much later or not at all.
"""

import numpy as np
import pytest

import dyn as dy


@pytest.fixture
def x():
    dy.renew_cg()
    return dy.inputTensor(np.arange(6.0).reshape(3, 2))


@pytest.mark.parametrize("scalar", [np.float32(2), np.float64(2), np.int64(2), np.array(2.0), 2, 2.0])
def test_numpy_scalars_are_numbers(x, scalar):
    base = np.arange(6.0).reshape(3, 2)
    np.testing.assert_allclose((x + scalar).npvalue(), base + 2)
    np.testing.assert_allclose((scalar + x).npvalue(), base + 2)
    np.testing.assert_allclose((x - scalar).npvalue(), base - 2)
    np.testing.assert_allclose((scalar - x).npvalue(), 2 - base)
    np.testing.assert_allclose((x * scalar).npvalue(), base * 2)
    np.testing.assert_allclose((scalar * x).npvalue(), base * 2)
    np.testing.assert_allclose((x / scalar).npvalue(), base / 2)


@pytest.mark.parametrize(
    "use, op",
    [
        (lambda x, a: x + a, "+"),
        (lambda x, a: a + x, "+"),
        (lambda x, a: x - a, "-"),
        (lambda x, a: a - x, "-"),
        (lambda x, a: x * a, "*"),
        (lambda x, a: a * x, "*"),
    ],
)
def test_arrays_are_refused_with_the_shape(x, use, op):
    with pytest.raises(TypeError, match=r"Expression \%s ndarray: .*shape \(3, 2\).*inputTensor" % op):
        use(x, np.ones((3, 2)))


def test_other_operands_are_python_type_errors(x):
    for bad in (1j, [1.0, 2.0], "a", None):
        with pytest.raises(TypeError):
            x + bad
        with pytest.raises(TypeError):
            x * bad
