"""A small language-model-like task: each softmax builder, on top of a word
embedding and a tanh layer, learns a bigram (Markov) source."""

import numpy as np
import pytest

import dyn as dy

V, E, H = 16, 12, 16


def _source(rng):
    """A Markov chain where each word has three likely successors."""
    P = np.full((V, V), 0.02)
    for w in range(V):
        P[w, rng.choice(V, 3, replace=False)] += [3.0, 2.0, 1.0]
    P /= P.sum(axis=1, keepdims=True)
    return P


def _corpus(P, n, rng):
    words = [0]
    for _ in range(n):
        words.append(int(rng.choice(V, p=P[words[-1]])))
    return words


def _make(kind, pc, counts):
    if kind == "standard":
        return dy.StandardSoftmaxBuilder(H, V, pc)
    if kind == "class-factored":
        classes = [list(range(k, k + 4)) for k in range(0, V, 4)]
        return dy.ClassFactoredSoftmaxBuilder.from_clusters(H, classes, pc)
    return dy.HierarchicalSoftmaxBuilder.from_counts(H, counts, pc)


@pytest.mark.parametrize("kind", ["standard", "class-factored", "hierarchical"])
def test_a_bigram_model_learns(kind):
    rng = np.random.RandomState(0)
    dy.reset_random_seed(0)
    P = _source(rng)
    train, test = _corpus(P, 3000, rng), _corpus(P, 600, rng)
    pc = dy.ParameterCollection()
    emb = pc.add_lookup_parameters((V, E))
    W, b = pc.add_parameters((H, E)), pc.add_parameters(H, init=0.0)
    sm = _make(kind, pc, np.bincount(train, minlength=V) + 1)
    trainer = dy.AdamTrainer(pc, 0.02)

    def mean_nll(words):
        dy.renew_cg()
        h = dy.tanh(dy.affine_transform([b, W, dy.lookup_batch(emb, words[:-1])]))
        return dy.mean_batches(sm.neg_log_softmax_batch(h, words[1:]))

    before = mean_nll(test).scalar_value()
    for _ in range(6):
        for start in range(0, len(train) - 1, 50):
            loss = mean_nll(train[start : start + 51])
            loss.backward()
            trainer.update()
    after = mean_nll(test).scalar_value()
    stationary = np.bincount(test, minlength=V) / len(test)
    entropy = -float(np.sum(stationary[:, None] * P * np.log(P)))  # the best achievable, about
    assert before > np.log(V) - 0.5
    assert after < entropy + 0.25, (before, after, entropy)
    # for the most frequent context: the learnt distribution ranks the source's
    # three successors first, and samples from it mostly fall on them
    w = int(np.argmax(np.bincount(train, minlength=V)))
    dy.renew_cg()
    h = dy.tanh(dy.affine_transform([b, W, dy.lookup(emb, w)]))
    learnt = sm.full_log_distribution(h).npvalue()
    assert set(np.argsort(-learnt)[:3]) == set(np.argsort(-P[w])[:3])
    draws = sm.sample(dy.concatenate_to_batch([h] * 400))
    assert np.mean([P[w, v] > 0.1 for v in draws]) > 0.8
