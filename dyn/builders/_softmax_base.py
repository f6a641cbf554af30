"""Shared parts of the softmax builders (dyn/builders/softmax.py): the
SoftmaxBuilder base class and helpers."""

import numpy as np

import dyn as dy


def _size(value, name):
    """A positive dimension; integral floats are accepted, as in DyNet."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError("%s must be an int, got %r" % (name, value))
    if value != int(value) or int(value) <= 0:
        raise ValueError("%s must be a positive integer, got %r" % (name, value))
    return int(value)


def _p(param, update):
    """A parameter (or whole lookup table) in the graph, constant unless update."""
    return param if update else dy.const_parameter(param)


def _affine(W, b, x, update):
    W = _p(W, update)
    return W * x if b is None else dy.affine_transform([_p(b, update), W, x])


def _uniforms(n, bd):
    """n x bd uniforms on (0, 1) from dyn's seeded generator."""
    u = dy.random_uniform((n,), 0.0, 1.0, batch_size=bd).npvalue()
    return np.asarray(u, dtype=np.float64).reshape(n, bd)


def _draw(probs, u):
    """Inverse-CDF draw of an index from unnormalised probabilities."""
    cdf = np.cumsum(np.asarray(probs, dtype=np.float64))
    return min(int(np.searchsorted(cdf, u * cdf[-1], side="right")), len(cdf) - 1)


def _grouped_nll(rep, B, items, params_of, update):
    """sum over items (key, b, target) of -log softmax(W_key x_b + b_key)[target]
    as a {1} x B expression (None without items).

    One affine transform per distinct key, over just the batch elements that
    use it, so the cost is the sizes of the softmaxes touched, not V.
    """
    if not items:
        return None
    groups = {}
    for key, b, target in items:
        bs, ts = groups.setdefault(key, ([], []))
        bs.append(b)
        ts.append(target)
    bd = rep.dim()[1]
    losses, slots, offset = [], [[] for _ in range(B)], 0
    for key, (bs, ts) in groups.items():
        W, bias = params_of(key)
        x = rep if bd == 1 or bs == list(range(bd)) else dy.pick_batch_elems(rep, bs)
        losses.append(dy.pickneglogsoftmax_batch(_affine(W, bias, x, update), ts))
        for i, b in enumerate(bs):
            slots[b].append(offset + i)
        offset += len(bs)
    if B == 1:
        return losses[0] if len(losses) == 1 else dy.esum(losses)
    if slots == [[b] for b in range(B)]:
        return losses[0]  # one group holding every element, in order
    # scatter: element b sums its K (padded with a zero) entries of the groups' losses
    K = max(len(s) for s in slots)
    flat = [s[k] if k < len(s) else offset for s in slots for k in range(K)]
    picked = dy.pick_batch_elems(dy.concatenate_to_batch(losses + [dy.zeros((1,))]), flat)
    return picked if K == 1 else dy.sum_elems(dy.reshape(picked, (K,), batch_size=B))


class SoftmaxBuilder:
    """Base of the softmax builders (DyNet's SoftmaxBuilder): subclasses set
    ``input_dim``, ``num_words`` (V), ``pc`` and ``spec``."""

    def neg_log_softmax(self, rep, wordidx, update=True):
        """-log p(wordidx | rep) for an unbatched rep: a {1} expression."""
        return self._nll(rep, [self._check_word(wordidx, "neg_log_softmax")], update, batched=False)

    def neg_log_softmax_batch(self, rep, wordidxs, update=True):
        """-log p(wordidxs[b] | rep_b) per batch element: a {1} x B expression
        (sum it with dy.sum_batches). rep has batch B = len(wordidxs), or 1
        (one rep for every word)."""
        words = [self._check_word(w, "neg_log_softmax_batch") for w in wordidxs]
        if not words:
            raise ValueError("%s.neg_log_softmax_batch: no word ids" % type(self).__name__)
        bd = self._check_rep(rep, "neg_log_softmax_batch")
        if bd not in (1, len(words)):
            raise ValueError(
                "%s.neg_log_softmax_batch: rep has batch size %d but %d word ids were given"
                % (type(self).__name__, bd, len(words))
            )
        return self._nll(rep, words, update, batched=True)

    def full_logits(self, rep, update=True):
        """Scores whose softmax is p(. | rep): a {V} expression (batch kept)."""
        raise NotImplementedError

    def full_log_distribution(self, rep, update=True):
        """log p(. | rep) over all V words: a {V} expression (batch kept)."""
        raise NotImplementedError

    def sample(self, rep):
        """A word id drawn from p(. | rep) (a list of ids for a batched rep)."""
        raise NotImplementedError

    def param_collection(self):
        """The builder's sub-collection (what dy.save stores with the spec)."""
        return self.pc

    @classmethod
    def from_spec(cls, spec, model):
        """Rebuild a builder from ``spec`` with new parameters in ``model``."""
        raise NotImplementedError

    # -- checks shared by the builders
    def _check_rep(self, rep, op):
        (dims, bd) = rep.dim()
        if dims[0] != self.input_dim or any(n != 1 for n in dims[1:]):
            raise ValueError(
                "%s.%s: rep must be a {%d} vector, got dims %r"
                % (type(self).__name__, op, self.input_dim, tuple(dims))
            )
        return bd

    def _unbatched(self, rep, op):
        if self._check_rep(rep, op) != 1:
            raise ValueError(
                "%s.%s: rep is batched (batch %d): use neg_log_softmax_batch"
                % (type(self).__name__, op, rep.dim()[1])
            )

    def _check_word(self, w, op):
        if isinstance(w, bool) or not isinstance(w, (int, np.integer)):
            raise TypeError("%s.%s: a word id must be an int, got %r" % (type(self).__name__, op, w))
        if not 0 <= w < self.num_words:
            raise IndexError(
                "%s.%s: word id %d is out of range (%d words)" % (type(self).__name__, op, w, self.num_words)
            )
        return int(w)

    def _nll(self, rep, words, update, batched):
        raise NotImplementedError
