"""Small tree tasks that the tree builders learn.

Random binary bracketings of words, a third of the vocabulary "positive", a
third "negative": a tree's label is whether the positive words outnumber the
negative ones (ties are not drawn), as examples/paper_fig2_tree_rnn.py. The
root's h feeds a softmax; the model must carry a count up the tree.
"""

import numpy as np
import pytest

import dyn as dy

VOCAB = 12


def random_tree(rng, words):
    if len(words) == 1:
        return int(words[0])
    k = rng.randint(1, len(words))
    return [random_tree(rng, words[:k]), random_tree(rng, words[k:])]


def make_data(rng, count, max_leaves=6):
    polarity = np.zeros(VOCAB, dtype=int)
    polarity[: VOCAB // 3] = 1
    polarity[VOCAB // 3 : 2 * VOCAB // 3] = -1
    data = []
    while len(data) < count:
        words = rng.randint(VOCAB, size=rng.randint(2, max_leaves + 1))
        total = polarity[words].sum()
        if total:
            data.append((random_tree(rng, words), int(total > 0)))
    return data


BUILDERS = {
    "nary": lambda m, d, h: dy.NaryTreeLSTMBuilder(2, 1, d, h, m),
    "child_sum": lambda m, d, h: dy.ChildSumTreeLSTMBuilder(1, d, h, m),
    "tree_rnn": lambda m, d, h: dy.TreeRNNBuilder(2, h, m),
}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_tree_builder_learns_to_count_sentiment(name):
    rng = np.random.RandomState(0)
    dy.reset_random_seed(0)
    data = make_data(rng, 500)
    train, test = data[:400], data[400:]
    H = 16
    m = dy.ParameterCollection()
    E = m.add_lookup_parameters((VOCAB, H))
    builder = BUILDERS[name](m, H, H)
    V, c = m.add_parameters((2, H)), m.add_parameters(2, init=0.0)
    trainer = dy.AdamTrainer(m, 0.01)

    def encode(tree):
        if isinstance(tree, int):
            return builder.add_input(E[tree])
        return builder.compose([encode(t) for t in tree])

    def logits(tree):
        return V * encode(tree).output() + c

    def accuracy(examples):
        right = 0
        for tree, label in examples:
            dy.renew_cg()
            right += int(np.argmax(logits(tree).npvalue()) == label)
        return right / len(examples)

    before = accuracy(test)
    losses = []
    for _ in range(4):
        total = 0.0
        for tree, label in train:
            dy.renew_cg()
            loss = dy.pickneglogsoftmax(logits(tree), label)
            total += loss.value()
            loss.backward()
            trainer.update()
        losses.append(total / len(train))
    after = accuracy(test)
    assert losses[-1] < 0.6 * losses[0], losses
    assert after >= 0.85 and after > before + 0.2, (before, after)
