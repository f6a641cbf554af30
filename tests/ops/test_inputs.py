"""sparse_inputTensor, one_hot, inputTensorTranspose: values (column-major,
batches), use in a graph, and errors."""

import numpy as np
import pytest

import dyn as dy
from dyn._core.core import graph as _graph
from dyn.ops.inputs import inputTensorTranspose, one_hot, sparse_inputTensor

# ---------------------------------------------------------------- sparse_inputTensor


def test_sparse_values_and_default():
    x = sparse_inputTensor(([0, 2], [1, 1]), [5.0, 7.0], (3, 2))
    assert x.dim() == ((3, 2), 1)
    np.testing.assert_array_equal(x.npvalue(), [[0, 5], [0, 0], [0, 7]])
    y = sparse_inputTensor([[1], [0]], np.array([2.0]), (2, 2), defval=-1)
    np.testing.assert_array_equal(y.npvalue(), [[-1, -1], [2, -1]])


def test_sparse_batched_last_dim_is_the_batch():
    rng = np.random.RandomState(0)
    dense = np.zeros((4, 3, 5))
    idx = tuple(rng.randint(0, n, size=6) for n in dense.shape)
    vals = rng.uniform(1, 2, size=6)
    dense[idx] = vals
    x = sparse_inputTensor(idx, vals, (4, 3, 5), batched=True)
    assert x.dim() == ((4, 3), 5)
    np.testing.assert_allclose(x.npvalue(), dense, rtol=1e-6)
    v = sparse_inputTensor(([1], [2]), [3.0], (2, 4), batched=True)  # {2} x 4
    assert v.dim() == ((2,), 4)
    b = sparse_inputTensor(([2],), [1.0], (3,), batched=True)  # a batch of scalars
    assert b.dim() == ((1,), 3)
    np.testing.assert_array_equal(b.npvalue().ravel(), [0, 0, 1])


def test_sparse_repeated_coordinate_keeps_the_last_and_empty_is_default():
    x = sparse_inputTensor(([1, 1],), [3.0, 4.0], (3,))
    np.testing.assert_array_equal(x.npvalue(), [0, 4, 0])
    e = sparse_inputTensor(([],), [], (3,), defval=2.5)
    np.testing.assert_array_equal(e.npvalue(), [2.5, 2.5, 2.5])


def test_sparse_in_a_graph_and_not_settable(float64):
    m = dy.ParameterCollection()
    W = m.add_parameters((2, 4), init=dy.ConstInitializer(1.0))
    x = sparse_inputTensor(([0, 3],), [2.0, -1.0], (4,))
    y = W * x
    np.testing.assert_allclose(y.npvalue(), [1.0, 1.0])
    dy.sum_elems(y).backward()
    np.testing.assert_allclose(W.grad_as_array(), [[2, 0, 0, -1]] * 2)
    with pytest.raises(ValueError):
        x.set([0.0] * 4)


# ---------------------------------------------------------------- one_hot


def test_one_hot_vector_and_batch():
    x = one_hot(5, 2)
    assert x.dim() == ((5,), 1)
    np.testing.assert_array_equal(x.npvalue(), [0, 0, 1, 0, 0])
    xs = one_hot(4, [0, 3, 3, 1])
    assert xs.dim() == ((4,), 4)
    np.testing.assert_array_equal(xs.npvalue(), np.eye(4)[:, [0, 3, 3, 1]])
    assert one_hot(3, [1]).dim() == ((3,), 1)
    assert one_hot(np.int64(3), np.int32(0)).dim() == ((3,), 1)
    assert one_hot(3, range(2)).dim() == ((3,), 2)


def test_one_hot_picks_a_column_and_is_constant(float64):
    m = dy.ParameterCollection()
    W = m.add_parameters((3, 5), init=dy.NumpyInitializer(np.arange(15.0).reshape(3, 5)))
    y = W * one_hot(5, [4, 1])
    np.testing.assert_array_equal(y.npvalue(), np.arange(15.0).reshape(3, 5)[:, [4, 1]])


# ---------------------------------------------------------------- inputTensorTranspose


def test_transpose_input_is_column_major():
    x = inputTensorTranspose([1, 2, 3, 4, 5, 6], (2, 3))
    np.testing.assert_array_equal(x.npvalue(), [[1, 3, 5], [2, 4, 6]])
    a = np.arange(24.0).reshape(2, 3, 4)
    y = inputTensorTranspose(a.ravel(order="F"), a.shape)
    np.testing.assert_array_equal(y.npvalue(), a)
    np.testing.assert_array_equal(y.npvalue(), dy.inputTensor(a).npvalue())


def test_transpose_input_default_dim_and_batch():
    x = inputTensorTranspose(np.array([1.0, 2.0, 3.0]))
    assert x.dim() == ((3,), 1)
    xb = inputTensorTranspose(np.arange(6.0), (3,), batch_size=2)
    assert xb.dim() == ((3,), 2)
    np.testing.assert_array_equal(xb.npvalue(), [[0, 3], [1, 4], [2, 5]])
    assert inputTensorTranspose([1.0, 2.0], 2).dim() == ((2,), 1)


def test_transpose_input_gradient_flows(float64):
    x = inputTensorTranspose([1.0, -2.0, 3.0, 0.5], (2, 2))
    dy.sum_elems(dy.cmult(x, x)).backward(full=True)
    np.testing.assert_allclose(x.gradient(), 2 * np.array([[1.0, 3.0], [-2.0, 0.5]]))


# ---------------------------------------------------------------- errors


def _raises(exc, match, fn, *args, **kwargs):
    n = _graph.num_nodes()
    with pytest.raises(exc, match=match):
        fn(*args, **kwargs)
    assert _graph.num_nodes() == n, "a failed call left a node behind"
    assert one_hot(3, 1).npvalue().sum() == 1.0  # the graph still works


def test_sparse_errors():
    _raises(
        TypeError,
        "sparse_inputTensor: values should be a 1-D array",
        sparse_inputTensor,
        ([0],),
        np.ones((1, 1)),
        (3,),
    )
    _raises(TypeError, "sparse_inputTensor: values must be a list", sparse_inputTensor, ([0],), 1.0, (3,))
    _raises(
        ValueError,
        "sparse_inputTensor: 1 index arrays for a shape of 2 dimensions",
        sparse_inputTensor,
        ([0],),
        [1.0],
        (3, 2),
    )
    _raises(
        IndexError,
        "sparse_inputTensor: index 3 is out of range for dimension 0 of size 3",
        sparse_inputTensor,
        ([3],),
        [1.0],
        (3,),
    )
    _raises(
        IndexError, "sparse_inputTensor: index -1 is out of range", sparse_inputTensor, ([-1],), [1.0], (3,)
    )
    _raises(
        ValueError,
        "sparse_inputTensor: index array 0 has 2 entries for 1 values",
        sparse_inputTensor,
        ([0, 1],),
        [1.0],
        (3,),
    )
    _raises(
        TypeError, "sparse_inputTensor: indices must be integers", sparse_inputTensor, ([0.5],), [1.0], (3,)
    )
    _raises(TypeError, "sparse_inputTensor: idxs must be a tuple/list", sparse_inputTensor, 0, [1.0], (3,))
    _raises(
        ValueError, "sparse_inputTensor: dimensions must be positive", sparse_inputTensor, ([],), [], (0,)
    )


def test_one_hot_errors():
    _raises(IndexError, "one_hot: index 5 is out of range for a vector of size 5", one_hot, 5, 5)
    _raises(IndexError, "one_hot: index -1 is out of range", one_hot, 5, [0, -1])
    _raises(ValueError, "one_hot: empty index list", one_hot, 5, [])
    _raises(ValueError, "one_hot: d must be positive", one_hot, 0, 0)
    _raises(TypeError, "one_hot: d must be an integer", one_hot, "5", 0)
    _raises(TypeError, "one_hot: idx must be an integer or a list", one_hot, 5, 1.5)
    _raises(TypeError, "one_hot: indices must be integers", one_hot, 5, [1, 2.5])


def test_transpose_input_errors():
    _raises(
        ValueError,
        "inputTensorTranspose: dimensions/batch size multiply to 6, which does not match .* 5",
        inputTensorTranspose,
        [1.0] * 5,
        (2, 3),
    )
    _raises(
        ValueError,
        "inputTensorTranspose: dimensions/batch size multiply to 6",
        inputTensorTranspose,
        [1.0] * 3,
        None,
        2,
    )
    _raises(
        TypeError, "inputTensorTranspose: val must be a 1-D", inputTensorTranspose, np.ones((2, 3)), (2, 3)
    )
    _raises(
        ValueError, "inputTensorTranspose: batch_size must be positive", inputTensorTranspose, [1.0], None, 0
    )
    _raises(
        TypeError,
        "inputTensorTranspose: batch_size must be an integer",
        inputTensorTranspose,
        [1.0],
        None,
        1.5,
    )
    _raises(ValueError, "inputTensorTranspose: dimensions must be positive", inputTensorTranspose, [], None)
