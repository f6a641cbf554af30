"""Random leaves (random_normal/bernoulli/uniform/gumbel) and the shared-mask
dropouts (dropout_dim, dropout_batch, block_dropout): statistics with many
samples, seeding, mask sharing, gradients equal to the mask, and errors."""

import numpy as np
import pytest

import dyn as dy
from dyn._core.core import graph as _graph

N = 40000  # samples: the mean's standard error is sigma / 200


@pytest.fixture(autouse=True)
def _seeded():
    """Deterministic draws; the tolerances are still about 5 standard errors."""
    dy.reset_random_seed(20240601)


def _ones(shape, batch=1):
    a = np.ones(tuple(shape) + ((batch,) if batch > 1 else ()))
    return dy.inputTensor(a, batched=batch > 1)


# ---------------------------------------------------------------- leaves: statistics


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_random_normal_mean_std(precision):
    dy.set_precision(precision)
    try:
        v = dy.random_normal((200, 200), mean=1.5, stddev=0.5).npvalue()
    finally:
        dy.set_precision("float32")
    assert v.shape == (200, 200)
    assert abs(v.mean() - 1.5) < 5 * 0.5 / np.sqrt(N)
    assert abs(v.std() - 0.5) < 0.01
    # normal tails: about 4.55% beyond 2 sigma
    assert abs(np.mean(np.abs(v - 1.5) > 1.0) - 0.0455) < 0.005


def test_random_normal_defaults_and_odd_count(float64):
    v = dy.random_normal(N + 1).npvalue()  # an odd count uses half a Box-Muller pair
    assert v.shape == (N + 1,)
    assert abs(v.mean()) < 5 / np.sqrt(N) and abs(v.std() - 1.0) < 0.02
    assert np.all(dy.random_normal(10, mean=3.0, stddev=0.0).npvalue() == 3.0)


@pytest.mark.parametrize("p", [0.0, 0.2, 0.5, 1.0])
def test_random_bernoulli_fraction_and_scale(p, float64):
    v = dy.random_bernoulli(N, p, scale=2.5).npvalue()
    assert set(np.unique(v)) <= {0.0, 2.5}
    frac = np.mean(v == 2.5)
    assert abs(frac - p) < 5 * np.sqrt(p * (1 - p) / N) + 1e-12


def test_random_bernoulli_default_scale(float64):
    v = dy.random_bernoulli((100, 10), 0.5).npvalue()
    assert set(np.unique(v)) == {0.0, 1.0}


def test_random_uniform_range_mean_var(float64):
    v = dy.random_uniform(N, -1.0, 3.0).npvalue()
    assert v.min() > -1.0 and v.max() < 3.0
    assert abs(v.mean() - 1.0) < 5 * np.sqrt(16 / 12 / N)
    assert abs(v.var() - 16 / 12) < 0.03
    # each quarter of the interval holds a quarter of the samples
    counts = np.histogram(v, bins=4, range=(-1, 3))[0] / N
    np.testing.assert_allclose(counts, 0.25, atol=0.01)


def test_random_gumbel_moments(float64):
    euler = 0.5772156649015329
    v = dy.random_gumbel(N).npvalue()
    assert abs(v.mean() - euler) < 5 * (np.pi / np.sqrt(6)) / np.sqrt(N)
    assert abs(v.var() - np.pi**2 / 6) < 0.12  # sd of the sample variance: 0.022
    w = dy.random_gumbel(N, mu=2.0, beta=0.5).npvalue()
    assert abs(w.mean() - (2.0 + 0.5 * euler)) < 5 * 0.5 * (np.pi / np.sqrt(6)) / np.sqrt(N)


def test_gumbel_max_trick_samples_the_softmax(float64):
    logits = np.log(np.array([0.1, 0.2, 0.3, 0.4]))
    g = dy.random_gumbel((4,), batch_size=20000).npvalue()
    picks = np.argmax(logits[:, None] + g, axis=0)
    np.testing.assert_allclose(np.bincount(picks, minlength=4) / 20000, [0.1, 0.2, 0.3, 0.4], atol=0.02)


# ---------------------------------------------------------------- leaves: dims, batches, graph behaviour


@pytest.mark.parametrize(
    "make",
    [
        lambda d, b: dy.random_normal(d, batch_size=b),
        lambda d, b: dy.random_bernoulli(d, 0.5, batch_size=b),
        lambda d, b: dy.random_uniform(d, 0, 1, batch_size=b),
        lambda d, b: dy.random_gumbel(d, batch_size=b),
    ],
)
def test_leaf_dims_and_independent_batch_elements(make):
    assert make(5, 1).dim() == ((5,), 1)
    assert make([2, 3], 1).dim() == ((2, 3), 1)
    y = make((50, 2), 3)
    assert y.dim() == ((50, 2), 3)
    v = y.npvalue()
    assert v.shape == (50, 2, 3) and np.all(np.isfinite(v))
    assert (v[..., 0] != v[..., 1]).any() and (v[..., 1] != v[..., 2]).any()


def test_leaf_is_a_constant_in_backward(float64):
    m = dy.ParameterCollection()
    w = m.add_parameters((6,), init=dy.ConstInitializer(2.0))
    r = dy.random_normal(6)
    loss = dy.sum_elems(dy.cmult(w, r))
    loss.backward()
    np.testing.assert_allclose(w.grad_as_array(), r.npvalue(), rtol=1e-12)  # gradient = the sample
    np.testing.assert_array_equal(r.gradient(), np.zeros(6))
    loss.backward(full=True)  # full: the leaf reports dloss/dr like an input, and has no backward
    np.testing.assert_array_equal(r.gradient(), np.full(6, 2.0))


def test_leaf_keeps_its_value_until_recomputed(float64):
    r = dy.random_uniform(20, 0, 1)
    a = r.npvalue()
    np.testing.assert_array_equal(r.npvalue(), a)  # computed once per forward
    b = r.npvalue(recalculate=True)  # a new forward draws again
    assert (a != b).any()


def test_same_seed_same_samples():
    def draw():
        dy.renew_cg()
        return [
            dy.random_normal((7, 3), 0.5, 2.0, batch_size=2).npvalue(),
            dy.random_bernoulli(100, 0.3).npvalue(),
            dy.random_uniform(9, -2, 2).npvalue(),
            dy.random_gumbel(11).npvalue(),
            dy.dropout_dim(_ones((5, 4)), 1, 0.5).npvalue(),
            dy.dropout_batch(_ones((3,), 8), 0.5).npvalue(),
            dy.block_dropout(_ones((3,)), 0.5).npvalue(),
        ]

    dy.reset_random_seed(4242)
    first = draw()
    dy.reset_random_seed(4242)
    again = draw()
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    later = draw()  # the stream moved on
    assert any((a != c).any() for a, c in zip(first, later))


def test_dy_init_seed_fixes_the_samples():
    dy.init(random_seed=99)
    a = dy.random_normal(50).npvalue()
    dy.renew_cg()
    dy.init(random_seed=99)
    np.testing.assert_array_equal(dy.random_normal(50).npvalue(), a)


# ---------------------------------------------------------------- shared-mask dropouts


def test_dropout_dim_shares_the_mask_along_d(float64):
    y = dy.dropout_dim(_ones((300, 40), batch=3), 0, 0.4).npvalue()
    assert set(np.unique(y)) <= {0.0, 1 / 0.6}
    # d = 0: one value per column (per batch element) -> whole columns dropped
    assert np.all(y == y[:1, :, :])
    kept = np.mean(y[0] != 0)
    assert abs(kept - 0.6) < 5 * np.sqrt(0.24 / 120)
    assert (y[0, :, 0] != y[0, :, 1]).any()  # independent per batch element
    z = dy.dropout_dim(_ones((40, 300)), 1, 0.4).npvalue()
    assert np.all(z == z[:, :1])  # d = 1: whole rows dropped
    assert 0 < np.mean(z[:, 0] != 0) < 1


def test_dropout_dim_order_3(float64):
    y = dy.dropout_dim(_ones((4, 50, 6)), 1, 0.5).npvalue()
    assert np.all(y == y[:, :1, :])
    assert len(np.unique(y[:, 0, :])) == 2  # both kept and dropped (4 x 6 draws)
    v = dy.dropout_dim(_ones((3,)), 0, 0.5).npvalue()
    assert len(set(v.tolist())) == 1  # a vector along its only dim: all or nothing


def test_dropout_batch_one_value_per_batch_element(float64):
    B = 2000
    y = dy.dropout_batch(_ones((3, 2), batch=B), 0.3).npvalue()
    assert np.all(y == y[:1, :1, :])
    kept = np.mean(y[0, 0] != 0)
    assert abs(kept - 0.7) < 5 * np.sqrt(0.21 / B)
    np.testing.assert_allclose(y[y != 0], 1 / 0.7, rtol=1e-12)


def test_block_dropout_all_or_nothing(float64):
    outcomes = []
    for _ in range(400):
        dy.renew_cg()
        v = dy.block_dropout(_ones((5, 2)), 0.25).npvalue()
        assert len(np.unique(v)) == 1
        outcomes.append(v[0, 0])
    outcomes = np.array(outcomes)
    assert set(np.unique(outcomes)) == {0.0, 1 / 0.75}
    assert abs(np.mean(outcomes != 0) - 0.75) < 5 * np.sqrt(0.1875 / 400)


@pytest.mark.parametrize(
    "drop",
    [
        lambda x: dy.dropout_dim(x, 0, 0.0),
        lambda x: dy.dropout_batch(x, 0.0),
        lambda x: dy.block_dropout(x, 0.0),
    ],
)
def test_p0_identity_p1_zeros(drop, float64):
    x = dy.inputTensor(np.arange(6.0).reshape(2, 3) - 2.5)
    np.testing.assert_array_equal(drop(x).npvalue(), x.npvalue())


def test_p1_gives_zeros(float64):
    x = dy.inputTensor(np.arange(6.0).reshape(2, 3) + 1)
    for y in (dy.dropout_dim(x, 1, 1.0), dy.dropout_batch(x, 1.0), dy.block_dropout(x, 1.0)):
        np.testing.assert_array_equal(y.npvalue(), np.zeros((2, 3)))  # zeros, not DyNet's NaN


@pytest.mark.parametrize(
    "drop,batch",
    [
        (lambda x: dy.dropout_dim(x, 1, 0.5), 3),
        (lambda x: dy.dropout_dim(x, 0, 0.5), 1),
        (lambda x: dy.dropout_batch(x, 0.5), 6),
        (lambda x: dy.block_dropout(x, 0.5), 1),
    ],
)
def test_gradient_is_the_mask(drop, batch, float64):
    a = np.random.RandomState(0).uniform(0.5, 1.5, size=(8, 5) + ((batch,) if batch > 1 else ()))
    x = dy.inputTensor(a, batched=batch > 1)
    y = drop(x)
    r = np.random.RandomState(1).uniform(-1, 1, size=a.shape)
    dy.sum_batches(dy.sum_elems(dy.cmult(y, dy.inputTensor(r, batched=batch > 1)))).backward(full=True)
    mask = y.npvalue() / a
    assert set(np.round(np.unique(mask), 12)) <= {0.0, 2.0}
    np.testing.assert_allclose(x.gradient(), r * mask, rtol=1e-12)


def test_parameter_gradient_through_dropout_dim(float64):
    m = dy.ParameterCollection()
    w = m.add_parameters((20, 6), init=dy.ConstInitializer(3.0))
    y = dy.dropout_dim(w, 0, 0.5)
    dy.sum_elems(y).backward()
    np.testing.assert_allclose(w.grad_as_array(), y.npvalue() / 3.0, rtol=1e-12)


def test_float32_scale():
    y = dy.dropout_batch(_ones((4,), batch=50), 0.25).npvalue()
    np.testing.assert_allclose(y[y != 0], np.float32(1 / 0.75), rtol=1e-6)


# ---------------------------------------------------------------- errors


def _raises(exc, match, fn, *args, **kwargs):
    n = _graph.num_nodes()
    with pytest.raises(exc, match=match):
        fn(*args, **kwargs)
    assert _graph.num_nodes() == n, "a failed call left a node behind"
    assert dy.random_uniform(3, 0, 1).npvalue().shape == (3,)  # the graph still works


def test_leaf_errors():
    _raises(ValueError, "random_normal: .*positive", dy.random_normal, (3, 0))
    _raises(ValueError, "random_normal: batch size must be positive", dy.random_normal, 3, batch_size=0)
    _raises(TypeError, "random_normal: batch_size must be an integer", dy.random_normal, 3, batch_size=1.5)
    _raises(TypeError, "random_normal", dy.random_normal, "3")
    _raises(TypeError, "random_normal: dimensions must be integers", dy.random_normal, (2.5,))
    _raises(ValueError, "random_normal: stddev must be >= 0", dy.random_normal, 3, 0.0, -1.0)
    _raises(TypeError, "random_normal: mean must be a number", dy.random_normal, 3, "a")
    _raises(ValueError, r"random_bernoulli: p must be in \[0, 1\]", dy.random_bernoulli, 3, 1.5)
    _raises(ValueError, r"random_bernoulli: p must be in \[0, 1\]", dy.random_bernoulli, 3, -0.1)
    _raises(TypeError, "random_bernoulli: p must be a number", dy.random_bernoulli, 3, None)
    _raises(TypeError, "random_bernoulli: scale must be a number", dy.random_bernoulli, 3, 0.5, "x")
    _raises(TypeError, "random_uniform: left must be a number", dy.random_uniform, 3, [0], 1)
    _raises(TypeError, "random_uniform: right must be a number", dy.random_uniform, 3, 0, None)
    _raises(ValueError, "random_gumbel: beta must be >= 0", dy.random_gumbel, 3, 0.0, -2.0)
    _raises(ValueError, "random_gumbel: a Dim has at most 7", dy.random_gumbel, (1,) * 8)


def test_dropout_variant_errors():
    x = dy.inputTensor(np.ones((2, 3)))
    _raises(
        ValueError,
        r"dropout_dim: cannot drop along dimension 2 of a tensor of order 2 \(\{2,3\}\)",
        dy.dropout_dim,
        x,
        2,
        0.5,
    )
    _raises(ValueError, "dropout_dim: d must be", dy.dropout_dim, x, -1, 0.5)
    _raises(ValueError, "dropout_dim: d must be", dy.dropout_dim, x, 10**12, 0.5)
    _raises(TypeError, "dropout_dim: d must be an integer", dy.dropout_dim, x, 0.5, 0.5)
    _raises(
        ValueError,
        "dropout_dim: supports tensors of order up to 3",
        dy.dropout_dim,
        dy.inputTensor(np.ones((2, 2, 2, 2))),
        0,
        0.5,
    )
    for name in ("dropout_dim", "dropout_batch", "block_dropout"):
        fn = getattr(dy, name)
        args = (0,) if name == "dropout_dim" else ()
        _raises(ValueError, name + r": p must be in \[0, 1\]", fn, x, *args, 1.5)
        _raises(TypeError, name + ": p must be a number", fn, x, *args, "p")
        _raises(TypeError, name, fn, np.ones((2, 3)), *args, 0.5)
    _raises(ValueError, "block_dropout: batched input", dy.block_dropout, _ones((3,), batch=2), 0.5)
