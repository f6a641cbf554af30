"""Softmax builders: output layers over a vocabulary, with DyNet's API.

Three ways to turn a representation x (a {input_dim} vector, or a batch of
them) into a distribution p(w | x) over words 0..V-1:

* :class:`StandardSoftmaxBuilder`: p = softmax(W x + b); O(V) per token.
* :class:`ClassFactoredSoftmaxBuilder`: p(w | x) = p(c | x) p(w | c, x), c the
  class of w (DyNet's cluster file); O(classes + class size) per token.
* :class:`HierarchicalSoftmaxBuilder`: a product of decisions along the path
  from the root of a tree to w (a binary decision = one logistic unit);
  O(depth) per token, O(log V) for a Huffman tree.

Every builder has DyNet's methods: ``neg_log_softmax(rep, w, update=True)``
(-log p(w | rep), a scalar), ``neg_log_softmax_batch(rep, ws, update=True)``
(a {1} x B loss, not summed), ``sample(rep)``, ``full_log_distribution(rep,
update=True)`` (log p(. | rep), {V}), ``full_logits(rep, update=True)``,
``param_collection()``. ``update=False`` uses the parameters as constants.

Where dyn differs from DyNet (on purpose):

* DyNet's ``ClassFactoredSoftmaxBuilder.full_logits`` adds a *probability*
  to a log-probability (log p(c|x) + softmax(subclass logits)[i]) and gives
  words missing from the cluster file the score -10000, so its softmax is
  not p(w|x). dyn's full_logits returns log p(w | x) exactly (valid logits:
  their softmax is p) and -inf for words without a class; full_log_distribution
  gives the same vector. The hierarchical builder does the same.
* Batched inputs work everywhere: ``rep`` with batch B in
  ``neg_log_softmax_batch`` (B word ids; a batch-1 rep is shared by every id),
  the distributions (batch B out) and ``sample`` (a list of B ids).
* ``sample`` always draws from p (DyNet's StandardSoftmaxBuilder without bias
  sampled from the raw scores W x); it uses dyn's random seed.
* Each call uses the parameters the way its own ``update`` asks (DyNet kept
  only the last mode used in a graph).
* DyNet's softmax builders cannot be saved with ``dy.save``; dyn's can
  (``spec``/``from_spec``; the spec holds the clusters or the tree, never a
  file name).
* HierarchicalSoftmaxBuilder was C++-only in DyNet (no full distribution).
"""

import math
import sys

import numpy as np

import dyn as dy
from dyn import io as _io
from dyn.builders import _softmax_trees as _trees
from dyn.builders._softmax_base import SoftmaxBuilder, _affine, _draw, _grouped_nll, _size, _uniforms
from dyn.builders._softmax_hsm import HierarchicalSoftmaxBuilder

__all__ = [
    "SoftmaxBuilder", "StandardSoftmaxBuilder", "ClassFactoredSoftmaxBuilder",
    "HierarchicalSoftmaxBuilder",
]  # fmt: skip


class StandardSoftmaxBuilder(SoftmaxBuilder):
    """The full softmax: p(. | x) = softmax(W x + b).

    Parameters (sub-collection ``standard-softmax-builder``, DyNet's order):
    ``W`` {V, input_dim} (Glorot) and, with bias, ``b`` {V} (zeros).
    neg_log_softmax_batch is one matrix product for the whole batch.

    When to use it: vocabularies up to some tens of thousands of words; it is
    exact and, on a batch, one matrix product.

    Example:
        >>> sm = dy.StandardSoftmaxBuilder(64, 10000, pc)
        >>> loss = dy.sum_batches(sm.neg_log_softmax_batch(h, next_words))
    """

    def __init__(self, input_dim, num_classes, pc, bias=True):
        self.input_dim = _size(input_dim, "input_dim")
        self.num_words = _size(num_classes, "num_classes")
        self.spec = (self.input_dim, self.num_words, bool(bias))
        self.pc = pc.add_subcollection("standard-softmax-builder")
        self.W = self.pc.add_parameters((self.num_words, self.input_dim))
        self.b = self.pc.add_parameters(self.num_words, init=0.0) if bias else None

    @classmethod
    def from_spec(cls, spec, model):
        input_dim, num_classes, bias = spec
        return cls(input_dim, num_classes, model, bias)

    def full_logits(self, rep, update=True):
        """W rep + b (DyNet's full_logits; the true logits here)."""
        self._check_rep(rep, "full_logits")
        return _affine(self.W, self.b, rep, update)

    def full_log_distribution(self, rep, update=True):
        return dy.log_softmax(self.full_logits(rep, update))

    def _nll(self, rep, words, update, batched):
        if not batched:
            self._unbatched(rep, "neg_log_softmax")
            return dy.pickneglogsoftmax(_affine(self.W, self.b, rep, update), words[0])
        return dy.pickneglogsoftmax_batch(_affine(self.W, self.b, rep, update), words)

    def sample(self, rep):
        bd = self._check_rep(rep, "sample")
        probs = np.asarray(dy.softmax(self.full_logits(rep, False)).npvalue()).reshape(self.num_words, bd)
        u = _uniforms(1, bd)
        out = [_draw(probs[:, b], u[0, b]) for b in range(bd)]
        return out[0] if bd == 1 else out


class ClassFactoredSoftmaxBuilder(SoftmaxBuilder):
    """Class-factored softmax: p(w | x) = p(c(w) | x) p(w | c(w), x).

        p(c | x) = softmax(r2c x + cbias)_c
        p(w | c, x) = softmax(rc2w_c x + rc2wbias_c)_(index of w in c)

    (1 for a class of one word). Parameters (sub-collection
    ``class-factored-softmax-builder``, DyNet's order): ``r2c`` {C, input_dim},
    ``cbias`` {C}, then for every class of more than one word ``rc2w_c``
    {n_c, input_dim} and ``rc2wbias_c`` {n_c}; biases start at 0. They are the
    attributes ``r2c``, ``cbias``, ``rc2w[c]``, ``rc2wbias[c]`` (None for a
    singleton class or without bias).

    The cluster file is DyNet's (one ``<class> <word>`` per line, see
    dyn/builders/_softmax_trees.py); ``dic`` maps every word to its id
    (0..V-1). As in DyNet, words of ``dic`` absent from the file have no
    class: their probability is 0 (-inf in the distributions, never
    sampled) and neg_log_softmax of one raises ValueError. A word of the file
    missing from ``dic``, a repeated word or a malformed line raises
    ValueError naming the file and line (DyNet aborted the process).

    Cost per token: O((C + n_c) input_dim), against O(V input_dim) for the full
    softmax. A batch computes the class scores in one matrix product and the
    word scores in one product per class present in the batch.

    When to use it: large vocabularies (10^4 - 10^6 words) with about sqrt(V)
    classes of about sqrt(V) words (e.g. Brown clusters or frequency bins).

    Example:
        >>> sm = dy.ClassFactoredSoftmaxBuilder(64, "clusters.txt", w2i, pc)
        >>> loss = sm.neg_log_softmax(h, w2i["the"])
    """

    def __init__(self, input_dim, cluster_file, dic, pc, bias=True):
        print("Reading clusters from %s ..." % cluster_file, file=sys.stderr)
        labels, class_words, num_words = _trees.read_class_file(cluster_file, dic)
        self._build(input_dim, class_words, labels, num_words, pc, bias)
        singletons = sum(len(ws) == 1 for ws in class_words)
        print(
            "Read %d words in %d clusters (%d singleton clusters)"
            % (sum(map(len, class_words)), len(class_words), singletons),
            file=sys.stderr,
        )

    @classmethod
    def from_clusters(cls, input_dim, clusters, pc, bias=True, num_words=None, labels=None):
        """Build from a list of classes, each a list of word ids (no file).

        Args:
            clusters: e.g. ``[[0, 3], [1], [2, 4, 5]]``; a word's position in its
                class is its sub-index.
            num_words: V (default: the largest id + 1); ids in no class get p = 0.
            labels: optional class names (default "0", "1", ...).
        """
        self = cls.__new__(cls)
        class_words = [[int(w) for w in ws] for ws in clusters]
        if labels is None:
            labels = [str(c) for c in range(len(class_words))]
        if num_words is None:
            num_words = max((w for ws in class_words for w in ws), default=-1) + 1
        self._build(input_dim, class_words, list(labels), num_words, pc, bias)
        return self

    @classmethod
    def from_spec(cls, spec, model):
        input_dim, class_words, labels, num_words, bias = spec
        return cls.from_clusters(input_dim, class_words, model, bias, num_words, labels)

    def _build(self, input_dim, class_words, labels, num_words, pc, bias):
        d = self.input_dim = _size(input_dim, "input_dim")
        V = self.num_words = _size(num_words, "num_words")
        if not class_words or any(not ws for ws in class_words) or len(labels) != len(class_words):
            raise ValueError("ClassFactoredSoftmaxBuilder: needs non-empty classes (and one label per class)")
        self.word_class = [-1] * V
        self.word_subindex = [0] * V
        for c, ws in enumerate(class_words):
            for i, w in enumerate(ws):
                if not 0 <= w < V or self.word_class[w] != -1:
                    raise ValueError(
                        "ClassFactoredSoftmaxBuilder: word id %d is out of range (%d words) or "
                        "in two classes" % (w, V)
                    )
                self.word_class[w], self.word_subindex[w] = c, i
        self.class_words, self.class_labels = class_words, labels
        C = len(class_words)
        self.spec = (d, class_words, labels, V, bool(bias))
        self.pc = pc.add_subcollection("class-factored-softmax-builder")
        self.r2c = self.pc.add_parameters((C, d))
        self.cbias = self.pc.add_parameters(C, init=0.0) if bias else None
        self.rc2w, self.rc2wbias = [None] * C, [None] * C
        for c, ws in enumerate(class_words):
            if len(ws) > 1:
                self.rc2w[c] = self.pc.add_parameters((len(ws), d))
                if bias:
                    self.rc2wbias[c] = self.pc.add_parameters(len(ws), init=0.0)
        # full distribution: log p(c) + log p(w | c) read from one concatenated vector
        offsets, n = [], C
        for ws in class_words:
            offsets.append(n)
            n += len(ws) if len(ws) > 1 else 0
        zero, minus_inf = n, n + 1
        self._class_slot = [c if c >= 0 else minus_inf for c in self.word_class]
        self._word_slot = [
            offsets[c] + i if c >= 0 and len(class_words[c]) > 1 else zero
            for c, i in zip(self.word_class, self.word_subindex)
        ]

    def class_logits(self, rep, update=True):
        """r2c rep + cbias: {C}."""
        self._check_rep(rep, "class_logits")
        return _affine(self.r2c, self.cbias, rep, update)

    def class_log_distribution(self, rep, update=True):
        """log p(. | rep) over the classes: {C}."""
        return dy.log_softmax(self.class_logits(rep, update))

    def subclass_logits(self, rep, classid, update=True):
        """rc2w_c rep + rc2wbias_c: {n_c} (a constant {1} zero for a singleton class)."""
        bd = self._check_rep(rep, "subclass_logits")
        if (
            isinstance(classid, bool)
            or not isinstance(classid, (int, np.integer))
            or not 0 <= classid < len(self.class_words)
        ):
            raise IndexError(
                "ClassFactoredSoftmaxBuilder: class id %r is out of range (%d classes)"
                % (classid, len(self.class_words))
            )
        if self.rc2w[classid] is None:
            return dy.zeros((1,), batch_size=bd)
        return _affine(self.rc2w[classid], self.rc2wbias[classid], rep, update)

    def subclass_log_distribution(self, rep, classid, update=True):
        """log p(. | classid, rep) over the words of the class: {n_c}."""
        return dy.log_softmax(self.subclass_logits(rep, classid, update))

    def full_log_distribution(self, rep, update=True):
        """log p(w | rep) = log p(c(w) | rep) + log p(w | c(w), rep), {V};
        -inf for words without a class. Costs O(V input_dim)."""
        parts = [self.class_log_distribution(rep, update)]
        parts += [
            self.subclass_log_distribution(rep, c, update) for c, W in enumerate(self.rc2w) if W is not None
        ]
        cat = dy.concatenate(parts + [dy.inputVector([0.0, -math.inf])])
        return dy.select_rows(cat, self._class_slot) + dy.select_rows(cat, self._word_slot)

    def full_logits(self, rep, update=True):
        """log p(. | rep), the same vector as full_log_distribution (DyNet added
        probabilities to log-probabilities here; see the module docstring)."""
        return self.full_log_distribution(rep, update)

    def _class_of(self, w, op):
        c = self.word_class[w]
        if c < 0:
            raise ValueError(
                "ClassFactoredSoftmaxBuilder.%s: word id %d has no class in the cluster file" % (op, w)
            )
        return c

    def _nll(self, rep, words, update, batched):
        op = "neg_log_softmax_batch" if batched else "neg_log_softmax"
        if not batched:
            self._unbatched(rep, op)
        classes = [self._class_of(w, op) for w in words]
        loss = dy.pickneglogsoftmax_batch(_affine(self.r2c, self.cbias, rep, update), classes)
        items = [
            (c, b, self.word_subindex[w])
            for b, (w, c) in enumerate(zip(words, classes))
            if self.rc2w[c] is not None
        ]
        sub = _grouped_nll(rep, len(words), items, lambda c: (self.rc2w[c], self.rc2wbias[c]), update)
        return loss if sub is None else loss + sub

    def sample(self, rep):
        """Draw a class from p(c | rep), then a word from p(w | c, rep)."""
        bd = self._check_rep(rep, "sample")
        C = len(self.class_words)
        pc = np.asarray(dy.softmax(self.class_logits(rep, False)).npvalue()).reshape(C, bd)
        x = np.asarray(rep.npvalue(), dtype=np.float64).reshape(self.input_dim, bd)
        u = _uniforms(2, bd)
        out = []
        for b in range(bd):
            c = _draw(pc[:, b], u[0, b])
            i = 0
            if self.rc2w[c] is not None:
                z = self.rc2w[c].as_array() @ x[:, b]
                if self.rc2wbias[c] is not None:
                    z = z + self.rc2wbias[c].as_array()
                i = _draw(np.exp(z - z.max()), u[1, b])
            out.append(self.class_words[c][i])
        return out[0] if bd == 1 else out


for _cls in (StandardSoftmaxBuilder, ClassFactoredSoftmaxBuilder, HierarchicalSoftmaxBuilder):
    _io.register_savable(_cls)
