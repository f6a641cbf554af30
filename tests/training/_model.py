"""A tiny tagger-like model for the training tests: an embedding table (a lookup
parameter, updated sparsely and lazily by the trainers) and a softmax layer."""

import numpy as np

import dyn as dy

VOCAB, TAGS, DIM = 12, 3, 4


def make_data(n, seed=0):
    """(word, tag) pairs whose tag is word % TAGS, with 10% label noise."""
    rng = np.random.RandomState(seed)
    words = rng.randint(0, VOCAB, size=n)
    tags = [w % TAGS if rng.rand() > 0.1 else rng.randint(TAGS) for w in words]
    return list(zip(words.tolist(), tags))


class Model:
    def __init__(self, pc):
        self.pc = pc
        self.E = pc.add_lookup_parameters((VOCAB, DIM), name="E")
        self.W = pc.add_parameters((TAGS, DIM), name="W")
        self.b = pc.add_parameters(TAGS, name="b")

    def scores(self, word):
        return self.W * self.E[word] + self.b

    def probs(self, word):
        return dy.softmax(self.scores(word))

    def loss(self, batch):
        return dy.esum([dy.pickneglogsoftmax(self.scores(w), t) for w, t in batch])

    def accuracy(self, data):
        right = 0
        for w, t in data:
            dy.renew_cg()
            right += int(np.argmax(self.scores(w).npvalue()) == t)
        return right / len(data)


def values(pc):
    return {p.name(): p.as_array() for p in pc.parameters_list() + pc.lookup_parameters_list()}
