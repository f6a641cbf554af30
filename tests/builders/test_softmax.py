"""StandardSoftmaxBuilder and ClassFactoredSoftmaxBuilder against float64 numpy
references of their equations; gradients, batches, sampling, saving."""

import numpy as np
import pytest

import dyn as dy
from dyn._core.core import graph as _graph

from . import _softmax_ref as ref

D = 4
CLUSTERS = [[0, 3], [1], [2, 4, 5], [7]]  # word 6 has no class; {1} and {7} are singletons
V = 8


def _builders(pc, bias=True):
    rng = np.random.RandomState(0)
    sm = dy.StandardSoftmaxBuilder(D, V, pc, bias=bias)
    cf = dy.ClassFactoredSoftmaxBuilder.from_clusters(D, CLUSTERS, pc, bias=bias, num_words=V)
    for b in (sm, cf):
        ref.randomize(b, rng)
    return sm, cf


@pytest.mark.parametrize("bias", [True, False])
def test_values_match_the_reference(float64, bias):
    sm, cf = _builders(dy.ParameterCollection(), bias)
    rng = np.random.RandomState(1)
    for b in (sm, cf):
        x = rng.randn(D)
        dy.renew_cg()
        e = dy.inputVector(x)
        want = ref.reference(b, x)
        np.testing.assert_allclose(b.full_log_distribution(e).npvalue(), want, rtol=1e-12, atol=1e-12)
        assert np.isclose(np.exp(want).sum(), 1.0)
        for w in range(V):
            if np.isfinite(want[w]):
                assert b.neg_log_softmax(e, w).scalar_value() == pytest.approx(-want[w], rel=1e-12)
    # the standard builder's logits are W x + b itself
    z = sm.W.as_array() @ x + (sm.b.as_array() if bias else 0)
    np.testing.assert_allclose(sm.full_logits(dy.inputVector(x)).npvalue(), z, rtol=1e-12)


def test_class_factored_pieces(float64):
    _, cf = _builders(dy.ParameterCollection())
    x = np.random.RandomState(2).randn(D)
    e = dy.inputVector(x)
    zc = cf.r2c.as_array() @ x + cf.cbias.as_array()
    np.testing.assert_allclose(cf.class_logits(e).npvalue(), zc)
    np.testing.assert_allclose(cf.class_log_distribution(e).npvalue(), ref.log_softmax(zc))
    zw = cf.rc2w[2].as_array() @ x + cf.rc2wbias[2].as_array()
    np.testing.assert_allclose(cf.subclass_logits(e, 2).npvalue(), zw)
    np.testing.assert_allclose(cf.subclass_log_distribution(e, 2).npvalue(), ref.log_softmax(zw))
    assert cf.subclass_log_distribution(e, 1).npvalue().tolist() == [0.0]  # a singleton: p(w | c) = 1
    assert cf.rc2w[1] is None and cf.rc2w[3] is None
    with pytest.raises(IndexError):
        cf.subclass_logits(e, 4)


def test_full_logits_are_log_probabilities_not_dynets_mix(float64):
    """DyNet added softmax(subclass logits) (a probability) to log p(c); dyn's
    full_logits is log p(w | x), so softmax(full_logits) is p itself."""
    _, cf = _builders(dy.ParameterCollection())
    x = np.random.RandomState(3).randn(D)
    e = dy.inputVector(x)
    logits = cf.full_logits(e).npvalue()
    want = ref.class_factored(cf, x)
    np.testing.assert_allclose(logits, want, rtol=1e-12)
    assert logits[6] == -np.inf  # no class: probability 0 (DyNet: the score -10000)
    np.testing.assert_allclose(dy.softmax(cf.full_logits(e)).npvalue(), np.exp(want), atol=1e-14)


@pytest.mark.parametrize("shared_rep", [False, True])
def test_batches_equal_a_loop_over_elements(float64, shared_rep):
    sm, cf = _builders(dy.ParameterCollection())
    rng = np.random.RandomState(4)
    words = [2, 1, 0, 5, 3, 7, 2, 4]  # several classes, singletons, a repeat
    B = len(words)
    X = rng.randn(D, 1 if shared_rep else B)
    for b in (sm, cf):
        dy.renew_cg()
        e = dy.inputTensor(X, batched=True)
        loss = b.neg_log_softmax_batch(e, words)
        assert loss.dim() == ((1,), B)
        want = [-ref.reference(b, X[:, 0 if shared_rep else i])[w] for i, w in enumerate(words)]
        np.testing.assert_allclose(loss.npvalue().ravel(), want, rtol=1e-12)
        full = b.full_log_distribution(e)
        assert full.dim() == ((V,), X.shape[1])
        values = full.npvalue().reshape(V, -1)
        for i in range(X.shape[1]):
            np.testing.assert_allclose(values[:, i], ref.reference(b, X[:, i]), rtol=1e-12)


@pytest.mark.parametrize("which", [0, 1])
def test_gradients_by_finite_differences(float64, which):
    pc = dy.ParameterCollection()
    b = _builders(pc)[which]
    rng = np.random.RandomState(5)
    dy.renew_cg()
    h = dy.tanh(dy.inputTensor(rng.randn(D, 5), batched=True))
    loss = dy.sum_batches(b.neg_log_softmax_batch(h, [0, 2, 1, 5, 0]))
    assert dy.check_grad(loss) == []
    dy.renew_cg()
    e = dy.inputVector(rng.randn(D))
    full = b.full_log_distribution(e)
    weights = np.where(np.isfinite(ref.reference(b, e.npvalue())), rng.randn(V), 0.0)
    loss = dy.dot_product(dy.select_rows(full, [w for w in range(V) if weights[w]]),
                          dy.inputVector(weights[weights != 0]))  # fmt: skip
    assert dy.check_grad(loss) == []
    dy.renew_cg()
    assert dy.check_grad(b.neg_log_softmax(dy.inputVector(rng.randn(D)), 3)) == []


def test_update_false_leaves_the_parameters_alone(float64):
    for b in _builders(dy.ParameterCollection()):
        dy.renew_cg()
        b.neg_log_softmax(dy.inputVector(np.ones(D)), 0, update=False).backward()
        for p in b.param_collection().parameters_list():
            assert not p.grad_as_array().any()
        dy.renew_cg()
        b.neg_log_softmax(dy.inputVector(np.ones(D)), 0).backward()
        assert any(p.grad_as_array().any() for p in b.param_collection().parameters_list())


def test_class_factored_touches_only_its_classes(float64):
    """The cost of a token is its class softmax and its word's class, not V."""
    _, cf = _builders(dy.ParameterCollection())
    dy.renew_cg()
    dy.sum_batches(cf.neg_log_softmax_batch(dy.inputTensor(np.ones((D, 2)), batched=True), [4, 2])).backward()
    assert cf.r2c.grad_as_array().any() and cf.rc2w[2].grad_as_array().any()
    assert not cf.rc2w[0].grad_as_array().any()
    # one affine transform per class present, whatever the batch size
    sizes = []
    for B in (4, 40):
        dy.renew_cg()
        x = dy.inputTensor(np.ones((D, B)), batched=True)
        before = _graph.num_nodes()
        cf.neg_log_softmax_batch(x, [2, 4, 0, 1] * (B // 4))
        sizes.append(_graph.num_nodes() - before)
    assert sizes[1] == sizes[0]


def test_sampling_follows_the_distribution(float64):
    sm, cf = _builders(dy.ParameterCollection())
    x = np.random.RandomState(6).randn(D) * 0.7
    N = 3000
    dy.reset_random_seed(1234)
    for b in (sm, cf):
        dy.renew_cg()
        draws = b.sample(dy.inputTensor(np.repeat(x[:, None], N, axis=1), batched=True))
        assert len(draws) == N
        p_value = ref.chi_square_p(np.bincount(draws, minlength=V), np.exp(ref.reference(b, x)))
        assert p_value > 1e-3, p_value  # fixed seed: deterministic; fails only for a wrong sampler
        dy.renew_cg()
        w = b.sample(dy.inputVector(x))
        assert isinstance(w, int) and 0 <= w < V and (b is sm or w != 6)


def test_sampling_without_bias_uses_the_softmax(float64):
    """DyNet's standard builder without bias sampled from the raw scores W x."""
    sm, _ = _builders(dy.ParameterCollection(), bias=False)
    x = np.random.RandomState(7).randn(D)
    dy.reset_random_seed(5)
    draws = sm.sample(dy.inputTensor(np.repeat(x[:, None], 2000, axis=1), batched=True))
    assert ref.chi_square_p(np.bincount(draws, minlength=V), np.exp(ref.standard(sm, x))) > 1e-3


def test_bad_arguments_raise_clear_errors(float64):
    sm, cf = _builders(dy.ParameterCollection())
    e = dy.inputVector(np.ones(D))
    for b in (sm, cf):
        with pytest.raises(IndexError, match="out of range"):
            b.neg_log_softmax(e, V)
        with pytest.raises(TypeError):
            b.neg_log_softmax(e, 1.5)
        with pytest.raises(ValueError, match="batched"):
            b.neg_log_softmax(dy.inputTensor(np.ones((D, 2)), batched=True), 0)
        with pytest.raises(ValueError, match="batch size 2 but 3"):
            b.neg_log_softmax_batch(dy.inputTensor(np.ones((D, 2)), batched=True), [0, 1, 2])
        with pytest.raises(ValueError, match=r"\{4\} vector"):
            b.full_log_distribution(dy.inputVector(np.ones(D + 1)))
    with pytest.raises(ValueError, match="word id 6 has no class"):
        cf.neg_log_softmax(e, 6)
    with pytest.raises(ValueError, match="in two classes"):
        dy.ClassFactoredSoftmaxBuilder.from_clusters(D, [[0, 1], [1]], dy.ParameterCollection())
    sm = dy.StandardSoftmaxBuilder(4.0, 6.0, dy.ParameterCollection())  # DyNet accepts integral floats
    assert sm.W.shape() == (6, 4)


def test_parameters_have_dynets_layout():
    pc = dy.ParameterCollection()
    sm = dy.StandardSoftmaxBuilder(3, 5, pc)
    cf = dy.ClassFactoredSoftmaxBuilder.from_clusters(3, CLUSTERS, pc, num_words=V)
    assert sm.param_collection().name() == "/standard-softmax-builder/"
    assert [p.shape() for p in sm.param_collection().parameters_list()] == [(5, 3), (5,)]
    assert not sm.b.as_array().any()
    assert cf.param_collection().name() == "/class-factored-softmax-builder/"
    shapes = [p.shape() for p in cf.param_collection().parameters_list()]
    assert shapes == [(4, 3), (4,), (2, 3), (2,), (3, 3), (3,)]  # r2c, cbias, then per class of > 1 word


def test_save_and_load_round_trip(tmp_path, float64):
    sm, cf = _builders(dy.ParameterCollection())
    base = str(tmp_path / "sm")
    dy.save(base, [sm, cf])
    sm2, cf2 = dy.load(base, dy.ParameterCollection())
    assert type(sm2) is dy.StandardSoftmaxBuilder and type(cf2) is dy.ClassFactoredSoftmaxBuilder
    assert cf2.class_words == CLUSTERS and cf2.num_words == V and cf2.spec == cf.spec
    x = np.random.RandomState(8).randn(D)
    for a, b in ((sm, sm2), (cf, cf2)):
        np.testing.assert_array_equal(b.full_log_distribution(dy.inputVector(x)).npvalue(),
                                      a.full_log_distribution(dy.inputVector(x)).npvalue())  # fmt: skip
