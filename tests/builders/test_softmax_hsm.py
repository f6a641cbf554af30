"""HierarchicalSoftmaxBuilder against a float64 numpy walk down its tree;
gradients, batches with paths of different lengths, sampling, saving."""

import numpy as np
import pytest

import dyn as dy

from . import _softmax_ref as ref

D = 4
# root: a 4-way softmax; [0, 1, 2] a 3-way one; [3, [4, 5]] and [4, 5] binary; [[7]] one-output chain
TREE = [[0, 1, 2], [3, [4, 5]], 6, [[7]]]
COUNTS = [30, 1, 7, 2, 2, 12, 5, 1, 3]


def _builders(pc, bias=True):
    rng = np.random.RandomState(0)
    mixed = dy.HierarchicalSoftmaxBuilder.from_tree(D, TREE, pc, bias=bias, num_words=9)  # word 8: absent
    huff = dy.HierarchicalSoftmaxBuilder.from_counts(D, COUNTS, pc, bias=bias)
    for b in (mixed, huff):
        ref.randomize(b, rng)
    return mixed, huff


@pytest.mark.parametrize("bias", [True, False])
def test_values_match_the_reference(float64, bias):
    rng = np.random.RandomState(1)
    for hs in _builders(dy.ParameterCollection(), bias):
        x = rng.randn(D)
        dy.renew_cg()
        e = dy.inputVector(x)
        want = ref.hierarchical(hs, x)
        np.testing.assert_allclose(hs.full_log_distribution(e).npvalue(), want, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(hs.full_logits(e).npvalue(), hs.full_log_distribution(e).npvalue())
        assert np.isclose(np.exp(want).sum(), 1.0)
        for w in range(hs.num_words):
            if np.isfinite(want[w]):
                assert hs.neg_log_softmax(e, w).scalar_value() == pytest.approx(-want[w], rel=1e-12)


def test_structure_and_parameters():
    mixed, huff = _builders(dy.ParameterCollection())
    assert mixed.param_collection().name() == "/hierarchical-softmax-builder/"
    assert mixed.W.shape() == (2, D) and mixed.b.shape() == (2, 1)  # two binary nodes: rows of tables
    assert sorted(W.shape() for W in mixed.node_W.values()) == [(3, D), (4, D)]
    assert huff.W.shape() == (len(COUNTS) - 1, D) and not huff.node_W
    depth = {w: len(p) for w, p in enumerate(dy.builders._softmax_trees.check_tree(huff.nodes)[2])}
    assert depth[0] == 1 and depth[0] <= depth[5] <= depth[1]  # frequent words: short paths


@pytest.mark.parametrize("shared_rep", [False, True])
def test_batches_equal_a_loop_over_elements(float64, shared_rep):
    rng = np.random.RandomState(2)
    # paths of different lengths (padded), words under two k-ary nodes, repeats
    batches = ([0, 4, 6, 7, 1, 3, 0, 2, 5], [0, 1, 8, 4, 0, 7])
    for hs, words in zip(_builders(dy.ParameterCollection()), batches):
        B = len(words)
        X = rng.randn(D, 1 if shared_rep else B)
        dy.renew_cg()
        e = dy.inputTensor(X, batched=True)
        loss = hs.neg_log_softmax_batch(e, words)
        assert loss.dim() == ((1,), B)
        want = [-ref.hierarchical(hs, X[:, 0 if shared_rep else i])[w] for i, w in enumerate(words)]
        np.testing.assert_allclose(loss.npvalue().ravel(), want, rtol=1e-12)
        full = hs.full_log_distribution(e).npvalue().reshape(hs.num_words, -1)
        for i in range(X.shape[1]):
            np.testing.assert_allclose(full[:, i], ref.hierarchical(hs, X[:, i]), rtol=1e-12)


def test_gradients_by_finite_differences(float64):
    rng = np.random.RandomState(3)
    for hs in _builders(dy.ParameterCollection()):
        dy.renew_cg()
        h = dy.tanh(dy.inputTensor(rng.randn(D, 6), batched=True))
        loss = dy.sum_batches(hs.neg_log_softmax_batch(h, [0, 4, 1, 7, 2, 5]))
        assert dy.check_grad(loss) == []
        dy.renew_cg()
        e = dy.inputVector(rng.randn(D))
        reachable = [w for w in range(hs.num_words) if np.isfinite(ref.hierarchical(hs, np.zeros(D))[w])]
        full = dy.select_rows(hs.full_log_distribution(e), reachable)
        assert dy.check_grad(dy.dot_product(full, dy.inputVector(rng.randn(len(reachable))))) == []
        dy.renew_cg()
        assert dy.check_grad(hs.neg_log_softmax(dy.inputVector(rng.randn(D)), 5)) == []


def test_a_token_reads_only_the_rows_on_its_path(float64):
    _, huff = _builders(dy.ParameterCollection())
    dy.renew_cg()
    huff.neg_log_softmax(dy.inputVector(np.ones(D)), 0).backward()  # word 0: one decision at the root
    grad = huff.W.grad_as_array()
    assert np.count_nonzero(np.abs(grad).sum(axis=1)) == 1
    assert list(huff.W.touched_rows()) == [huff.node_row[0]]
    dy.renew_cg()
    huff.neg_log_softmax(dy.inputVector(np.ones(D)), 1, update=False).backward()
    np.testing.assert_array_equal(huff.W.grad_as_array(), grad)  # constants: nothing added


def test_absent_words_and_tiny_trees(float64):
    mixed, _ = _builders(dy.ParameterCollection())
    e = dy.inputVector(np.ones(D))
    assert mixed.full_log_distribution(e).npvalue()[8] == -np.inf
    with pytest.raises(ValueError, match="word id 8 is not in the tree"):
        mixed.neg_log_softmax(e, 8)
    one = dy.HierarchicalSoftmaxBuilder.from_counts(D, [5], dy.ParameterCollection())
    assert one.neg_log_softmax(e, 0).scalar_value() == 0.0 and one.sample(e) == 0
    assert one.full_log_distribution(e).npvalue().tolist() == [0.0]
    two = dy.HierarchicalSoftmaxBuilder.from_tree(D, [0, 1], dy.ParameterCollection(), bias=False)
    assert np.isclose(np.exp(two.full_log_distribution(e).npvalue()).sum(), 1.0)


def test_sampling_follows_the_distribution(float64):
    rng = np.random.RandomState(4)
    dy.reset_random_seed(99)
    for hs in _builders(dy.ParameterCollection()):
        x = rng.randn(D) * 0.6
        dy.renew_cg()
        draws = hs.sample(dy.inputTensor(np.repeat(x[:, None], 3000, axis=1), batched=True))
        p = np.exp(ref.hierarchical(hs, x))
        assert ref.chi_square_p(np.bincount(draws, minlength=hs.num_words), p) > 1e-3


def test_save_and_load_round_trip(tmp_path, float64):
    mixed, huff = _builders(dy.ParameterCollection())
    base = str(tmp_path / "hsm")
    dy.save(base, [mixed, huff])
    mixed2, huff2 = dy.load(base, dy.ParameterCollection())
    x = np.random.RandomState(5).randn(D)
    for a, b in ((mixed, mixed2), (huff, huff2)):
        assert type(b) is dy.HierarchicalSoftmaxBuilder and b.spec == a.spec and b.nodes == a.nodes
        np.testing.assert_array_equal(b.full_log_distribution(dy.inputVector(x)).npvalue(),
                                      a.full_log_distribution(dy.inputVector(x)).npvalue())  # fmt: skip


def test_bad_arguments(float64):
    mixed, _ = _builders(dy.ParameterCollection())
    e = dy.inputVector(np.ones(D))
    with pytest.raises(IndexError):
        mixed.neg_log_softmax(e, 9)
    with pytest.raises(ValueError, match="batched"):
        mixed.neg_log_softmax(dy.inputTensor(np.ones((D, 2)), batched=True), 0)
    with pytest.raises(ValueError, match="vector"):
        mixed.sample(dy.inputVector(np.ones(D + 2)))
    with pytest.raises(ValueError):
        dy.HierarchicalSoftmaxBuilder.from_tree(D, [[0, 1], [1]], dy.ParameterCollection())
