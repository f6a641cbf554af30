"""HierarchicalSoftmaxBuilder (exported by dyn/builders/softmax.py)."""

import math
import sys

import numpy as np

import dyn as dy
from dyn.builders import _softmax_trees as _trees
from dyn.builders._softmax_base import SoftmaxBuilder, _affine, _draw, _grouped_nll, _p, _size, _uniforms


def _row_input(a):
    """A (B, L) array as a constant {1, L} x B expression."""
    B, L = a.shape
    return dy.inputTensor(a.T.reshape(1, L, B), batched=True)


def _sigmoid(z):
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


class HierarchicalSoftmaxBuilder(SoftmaxBuilder):
    """Hierarchical softmax: p(w | x) is a product of decisions along the path
    from the root of a tree to the word w.

        p(w | x) = prod over the nodes n on the path of p(branch_n | n, x)
        binary node:       p(branch 0) = sigmoid(W[n] . x + b[n]),  p(branch 1) = 1 - p(branch 0)
        node of k > 2:     p(branch) = softmax(W_n x + b_n)_branch
        node of 1 output:  p = 1 (no parameters)

    so -log p(w | x) = -sum log_sigmoid(+-(W[n] . x + b[n])) + the k-ary terms.

    Constructors:

    * ``HierarchicalSoftmaxBuilder(input_dim, cluster_file, dic, pc, bias=True,
      bitstrings=False)``: DyNet's (C++) tree file, one word per line,
      ``<symbol> <symbol> ...<TAB><word>``: the path from the root, one symbol
      per level (see dyn/builders/_softmax_trees.py). With ``bitstrings=True``
      every character of a symbol is a level, so a Brown-cluster file
      (``0110<TAB>word<TAB>count``) gives the binary tree of the clustering,
      with a softmax over the words of each leaf cluster (read as DyNet reads
      it, that file is a two-level tree: one level of clusters, then words).
    * ``from_counts(input_dim, counts, pc, bias=True)``: a binary Huffman tree
      over word counts (word2vec's choice): frequent words get short paths.
    * ``from_tree(input_dim, tree, pc, bias=True)``: nested lists of word ids,
      e.g. ``[[0, 1], [2, [3, 4]]]``.

    Parameters (sub-collection ``hierarchical-softmax-builder``): the lookup
    tables ``W`` (one {input_dim} row per binary node, Glorot) and ``b`` (one
    {1} row, zeros; None without bias), rows in node order, so a token reads
    and updates only the rows on its path; then for every k-ary node
    ``node_W[n]`` {k, input_dim} and ``node_b[n]`` {k}.

    Cost per token: O(depth input_dim) (binary decisions of the path as one
    gather + one product); a batch gathers all its paths at once. The full
    distribution costs O((nodes + V depth) input_dim).

    Differences from DyNet's C++ builder: -log sigmoid is computed stably;
    full_log_distribution exists (DyNet raised "not implemented"); a node may
    hold words beside child nodes (DyNet mixed them up); the parameters are
    tables, not one Parameters per node (so DyNet C++ model files do not
    populate it). Words of ``dic`` missing from the tree have p = 0, as in the
    class-factored builder.

    When to use it: very large vocabularies where even a class-factored
    softmax is too slow to train; a Huffman tree makes the average path
    short. Exact, but usually a little less accurate than a full softmax.

    Example:
        >>> sm = dy.HierarchicalSoftmaxBuilder.from_counts(64, counts, pc)
        >>> loss = dy.sum_batches(sm.neg_log_softmax_batch(h, next_words))
    """

    def __init__(self, input_dim, cluster_file, dic, pc, bias=True, bitstrings=False):
        print("Reading clusters from %s ..." % cluster_file, file=sys.stderr)
        nodes, num_words = _trees.read_tree_file(cluster_file, dic, bitstrings)
        self._build(input_dim, nodes, num_words, pc, bias)
        print("Done reading clusters.", file=sys.stderr)

    @classmethod
    def from_counts(cls, input_dim, counts, pc, bias=True):
        """A binary Huffman tree over words 0..len(counts)-1 (counts >= 0)."""
        self = cls.__new__(cls)
        self._build(input_dim, _trees.huffman_tree(counts), len(counts), pc, bias)
        return self

    @classmethod
    def from_tree(cls, input_dim, tree, pc, bias=True, num_words=None):
        """A tree given as nested lists of word ids (num_words: V, default the
        largest id + 1)."""
        self = cls.__new__(cls)
        self._build(input_dim, _trees.nested_tree(tree), num_words, pc, bias)
        return self

    @classmethod
    def from_spec(cls, spec, model):
        input_dim, nodes, num_words, bias = spec
        self = cls.__new__(cls)
        self._build(input_dim, nodes, num_words, model, bias)
        return self

    def _build(self, input_dim, nodes, num_words, pc, bias):
        d = self.input_dim = _size(input_dim, "input_dim")
        nodes, V, paths = _trees.check_tree(nodes, num_words)
        self.nodes, self.num_words = nodes, _size(V, "num_words")
        self.spec = (d, nodes, V, bool(bias))
        self.pc = pc.add_subcollection("hierarchical-softmax-builder")
        binary = [n for n, outs in enumerate(nodes) if len(outs) == 2]
        self.node_row = {n: r for r, n in enumerate(binary)}
        R = len(self.node_row)
        self.W = self.b = None
        if R:
            glorot = dy.UniformInitializer(math.sqrt(6.0 / (1 + d)))  # Glorot of a {1, d} row, as DyNet
            self.W = self.pc.add_lookup_parameters((R, d), init=glorot)
            if bias:
                self.b = self.pc.add_lookup_parameters((R, 1), init=dy.ConstInitializer(0.0))
        self.node_W, self.node_b = {}, {}
        for n, outs in enumerate(nodes):
            if len(outs) > 2:
                self.node_W[n] = self.pc.add_parameters((len(outs), d))
                self.node_b[n] = self.pc.add_parameters(len(outs), init=0.0) if bias else None
        # per word: its binary rows and signs, its k-ary (node, branch) steps, and
        # its slots in the vector the full distribution concatenates
        offsets, size = {}, 2 * R
        for n in self.node_W:
            offsets[n] = size
            size += len(nodes[n])
        zero, minus_inf = size, size + 1
        self._rows, self._signs, self._kary, slots = [], [], [], []
        for path in paths:
            rows, signs, kary, slot = [], [], [], [minus_inf] if path is None else []
            for n, branch in path or ():
                if len(nodes[n]) == 2:
                    r = self.node_row[n]
                    rows.append(r)
                    signs.append(1.0 if branch == 0 else -1.0)
                    slot.append(r if branch == 0 else R + r)
                elif len(nodes[n]) > 2:
                    kary.append((n, branch))
                    slot.append(offsets[n] + branch)
            self._rows.append(rows)
            self._signs.append(signs)
            self._kary.append(kary)
            slots.append(slot)
        self._present = [p is not None for p in paths]
        self._depth = max(len(p) for p in paths if p is not None)
        self._levels = max(1, max(len(s) for s in slots))
        self._full_index = [s[k] if k < len(s) else zero for k in range(self._levels) for s in slots]

    def _nll(self, rep, words, update, batched):
        op = "neg_log_softmax_batch" if batched else "neg_log_softmax"
        if not batched:
            self._unbatched(rep, op)
        for w in words:
            if not self._present[w]:
                raise ValueError("HierarchicalSoftmaxBuilder.%s: word id %d is not in the tree" % (op, w))
        B = len(words)
        parts = [self._binary_nll(rep, words, update)]
        items = [(n, b, branch) for b, w in enumerate(words) for n, branch in self._kary[w]]
        parts.append(_grouped_nll(rep, B, items, lambda n: (self.node_W[n], self.node_b[n]), update))
        parts = [p for p in parts if p is not None]
        if not parts:  # a one-word vocabulary: p = 1
            return dy.zeros((1,), batch_size=B)
        return parts[0] if len(parts) == 1 else parts[0] + parts[1]

    def _binary_nll(self, rep, words, update):
        """-sum over the binary steps of log_sigmoid(sign (W[n] . x + b[n])):
        the paths of the batch, padded to the longest, gathered at once."""
        lengths = [len(self._rows[w]) for w in words]
        B, L = len(words), max(lengths)
        if L == 0:
            return None
        rows, signs, mask = [], np.ones((B, L)), np.zeros((B, L))
        for b, w in enumerate(words):
            n = lengths[b]
            rows += self._rows[w] + [0] * (L - n)
            signs[b, :n] = self._signs[w]
            mask[b, :n] = 1.0
        M = dy.reshape(dy.lookup_batch(self.W, rows, update), (self.input_dim, L), batch_size=B)
        z = dy.transpose(rep) * M  # {1, L} x B
        if self.b is not None:
            z = z + dy.reshape(dy.lookup_batch(self.b, rows, update), (1, L), batch_size=B)
        ll = dy.log_sigmoid(dy.cmult(z, _row_input(signs)))
        if min(lengths) < L:
            ll = dy.cmult(ll, _row_input(mask))
        return -dy.sum_elems(ll)

    def full_log_distribution(self, rep, update=True):
        """log p(w | rep) for every word, {V} (batch kept); -inf for words
        not in the tree."""
        self._check_rep(rep, "full_log_distribution")
        parts = []
        R = len(self.node_row)
        if R:
            z = dy.transpose(rep) * _p(self.W, update)  # {1, R}: every binary node at once
            if self.b is not None:
                z = z + _p(self.b, update)
            z = dy.reshape(z, (R,))
            parts += [dy.log_sigmoid(z), dy.log_sigmoid(-z)]
        for n, W in self.node_W.items():
            parts.append(dy.log_softmax(_affine(W, self.node_b[n], rep, update)))
        cat = dy.concatenate(parts + [dy.inputVector([0.0, -math.inf])])
        picked = dy.select_rows(cat, self._full_index)  # level k of word w at k V + w
        if self._levels == 1:
            return picked
        return dy.sum_dim(dy.reshape(picked, (self.num_words, self._levels)), [1])

    def full_logits(self, rep, update=True):
        """log p(. | rep): the same vector as full_log_distribution (valid
        logits: their softmax is p)."""
        return self.full_log_distribution(rep, update)

    def sample(self, rep):
        """Walk down from the root, drawing each branch from its node's distribution."""
        bd = self._check_rep(rep, "sample")
        x = np.asarray(rep.npvalue(), dtype=np.float64).reshape(self.input_dim, bd)
        u = _uniforms(self._depth, bd)
        out = []
        for b in range(bd):
            node, level = 0, 0
            while True:
                outs = self.nodes[node]
                branch = 0
                if len(outs) == 2:
                    r = self.node_row[node]
                    z = float(self.W.row_as_array(r) @ x[:, b])
                    z += float(self.b.row_as_array(r)[0]) if self.b is not None else 0.0
                    branch = 0 if u[level, b] < _sigmoid(z) else 1
                elif len(outs) > 2:
                    z = self.node_W[node].as_array() @ x[:, b]
                    if self.node_b[node] is not None:
                        z = z + self.node_b[node].as_array()
                    branch = _draw(np.exp(z - z.max()), u[level, b])
                level += 1
                if outs[branch] >= 0:
                    out.append(outs[branch])
                    break
                node = ~outs[branch]
        return out[0] if bd == 1 else out
