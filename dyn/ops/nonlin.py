"""Nonlinearities, the softmax family, softmax losses, dropout and noise
(compiled in dyn/_core/ops/nonlin.pyx; kernels in dyn/_core/cpu/nonlin.pyx and softmax.pyx)."""

from __future__ import annotations

import numpy as np

from dyn._core.ops import nonlin as _k
from dyn.ops._registry import Case, op

_ELEM_BATCHES = ("none", "all")
_ELEM = [Case([(3, 2)], batches=_ELEM_BATCHES), Case([(5,)], batches=_ELEM_BATCHES)]
_POS = [Case([(3, 2)], domain="positive", batches=_ELEM_BATCHES),
        Case([(5,)], domain="positive", batches=_ELEM_BATCHES)]


def _mat(a):
    """A DyNet vector {n} is an n x 1 matrix."""
    return a.reshape(a.shape[0], -1) if a.ndim < 2 else a


def _lse(a, axis):
    m = np.max(a, axis=axis, keepdims=True)
    return m + np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True))


def _softmax_ref(x, d=0):
    a = _mat(x)
    return np.exp(a - _lse(a, d)).reshape(x.shape)


def _log_softmax_ref(x, restrict=None):
    if restrict is None:
        a = _mat(x)
        return (a - _lse(a, 0)).reshape(x.shape)
    out = np.full(x.shape, -np.inf)
    keep = sorted(set(restrict))
    flat = x.reshape(-1)
    out.reshape(-1)[keep] = flat[keep] - _lse(flat[keep], 0)
    return out


def _pnls_batch_ref(x, vs):
    xs = x.reshape(x.shape[0], -1)              # (n, B); B is 1 when x is broadcast
    cols = xs[:, [0] * len(vs)] if xs.shape[1] == 1 else xs
    return np.array([[(_lse(cols[:, b], 0) - cols[v, b])[0] for b, v in enumerate(vs)]])


# ---------------------------------------------------------------- elementwise


@op(formula="y_i = tanh(x_i)", batch="per element", reference=np.tanh, cases=_ELEM, direct=_k.tanh)
def tanh(x):
    """Hyperbolic tangent, elementwise. Backward uses the output: 1 - y^2.

    Example:
        >>> h = dy.tanh(W * x + b)
    """


@op(formula="y_i = 1 / (1 + exp(-x_i))", batch="per element",
    reference=lambda x: 1 / (1 + np.exp(-x)), cases=_ELEM, direct=_k.logistic)
def logistic(x):
    """Logistic sigmoid, elementwise. Backward uses the output: y (1 - y).

    Example:
        >>> gate = dy.logistic(Wg * x + bg)
    """


@op(formula="y_i = max(x_i, 0)", batch="per element", reference=lambda x: np.maximum(x, 0), cases=_ELEM,
    direct=_k.rectify)
def rectify(x):
    """ReLU, elementwise; the gradient at 0 is 0.

    Example:
        >>> h = dy.rectify(W * x + b)
    """


@op(formula="y_i = exp(x_i)", batch="per element", reference=np.exp, cases=_ELEM, direct=_k.exp)
def exp(x):
    """Exponential, elementwise. Backward uses the output: dy/dx = y.

    Example:
        >>> scores = dy.exp(logits)
    """


@op(formula="y_i = ln(x_i), x_i > 0", batch="per element", reference=np.log, cases=_POS, direct=_k.log)
def log(x):
    """Natural logarithm, elementwise (NaN or -inf outside x > 0, as DyNet).

    Example:
        >>> ll = dy.log(dy.pick(probs, gold))
    """


# ---------------------------------------------------------------- softmax family


@op(formula="y = exp(x - max) / sum exp(x - max) along dimension d", batch="per element",
    reference=_softmax_ref,
    cases=[Case([(5,)], batches=_ELEM_BATCHES), Case([(3, 4)], batches=_ELEM_BATCHES),
           Case([(3, 4)], {"d": 1}, batches=_ELEM_BATCHES), Case([(4, 1)], {"d": 0}, batches=_ELEM_BATCHES)],
    direct=_k.softmax)
def softmax(x, d=0):
    """Softmax over dimension d of a vector or matrix (numerically stable).

    Args:
        x: an expression of at most 2 dimensions.
        d: 0 normalises each column over its rows, 1 each row over its columns.

    Example:
        >>> probs = dy.softmax(W * h + b)
    """


@op(formula="y = x - log sum_i exp(x_i), per column; with restrict, over those entries, others -inf",
    batch="per element (restrict: unbatched only)", reference=_log_softmax_ref,
    cases=[Case([(5,)], batches=_ELEM_BATCHES), Case([(3, 4)], batches=_ELEM_BATCHES),
           # the -inf entries make the generated sum(R * y) loss infinite: the
           # restricted gradient is tested in tests/ops/test_nonlin_errors.py
           Case([(6,)], {"restrict": [0, 2, 5]}, batches=("none",), grad=False)], direct=_k.log_softmax)
def log_softmax(x, restrict=None):
    """Column-wise log-softmax, or over the entries in ``restrict`` only.

    Args:
        x: an expression of at most 2 dimensions (a vector when restricted).
        restrict: optional list of indices; the other entries are -inf and
            get no gradient.

    Example:
        >>> logp = dy.log_softmax(scores)
        >>> logp_allowed = dy.log_softmax(scores, restrict=[0, 3, 4])
    """


@op(formula="y = log sum_j exp(x_j), elementwise over the list", batch="batch 1 broadcasts",
    reference=lambda *xs: np.logaddexp.reduce(np.stack(xs), axis=0), list_input=True,
    cases=[Case([(3, 2), (3, 2), (3, 2)]), Case([(4,), (4,)]), Case([(4,)])], direct=_k.logsumexp)
def logsumexp(xs):
    """Elementwise log(sum_j exp(xs[j])), numerically stable.

    Args:
        xs: a list (not a tuple) of same-shaped expressions.

    Example:
        >>> alpha_t = dy.logsumexp([alpha + trans for alpha, trans in zip(alphas, transitions)])
    """


@op(formula="y = -log softmax(x)_v = log sum_i exp(x_i) - x_v", batch="x must be unbatched: Dim {1}",
    reference=lambda x, v: _lse(x.reshape(-1), 0) - x.reshape(-1)[v],
    cases=[Case([(5,)], {"v": 2}, batches=("none",)), Case([(4, 1)], {"v": 0}, batches=("none",))],
    direct=_k.pickneglogsoftmax)
def pickneglogsoftmax(x, v):
    """Negative log-softmax of one entry: the cross-entropy loss of class v.

    The softmax is kept from forward, so backward is softmax(x) - onehot(v).

    Example:
        >>> loss = dy.pickneglogsoftmax(W * h + b, gold)
    """


@op(formula="y_b = -log softmax(x_b)_{vs[b]}", batch="{1} x len(vs), not summed; x of batch 1 broadcasts",
    reference=_pnls_batch_ref, batch_reference=True,
    cases=[Case([(5,)], lambda bs: {"vs": [(2 * b + 1) % 5 for b in range(bs)]}, batches=("none", "all")),
           # x of batch 1 against three indices: broadcast
           Case([(4,)], {"vs": [1, 3, 0]}, batches=("none",))], direct=_k.pickneglogsoftmax_batch)
def pickneglogsoftmax_batch(x, vs):
    """Per batch element b, -log softmax(x_b)[vs[b]]: a {1} x B loss (sum it
    with ``dy.sum_batches`` before backward).

    Args:
        x: a batched vector expression (batch size len(vs), or 1 to share it).
        vs: one class index per batch element.

    Example:
        >>> loss = dy.sum_batches(dy.pickneglogsoftmax_batch(W * h + b, golds))
    """


# ---------------------------------------------------------------- dropout, noise, gradient flow


@op(formula="y_i = x_i m_i / (1 - p), m_i ~ Bernoulli(1 - p)", batch="independent mask per batch element",
    reference=lambda x, p: x, random=True,   # E[y] = x; the statistics are in test_nonlin_random.py
    cases=[Case([(4, 3)], {"p": 0.5}, batches=_ELEM_BATCHES, grad=False),
           Case([(5,)], {"p": 0.0}, batches=_ELEM_BATCHES, grad=False)], direct=_k.dropout)
def dropout(x, p):
    """Inverted dropout: each element is kept with probability 1 - p and scaled
    by 1 / (1 - p), so E[y] = x. The mask is kept for backward.

    Args:
        x: any expression.
        p: drop probability in [0, 1] (0 is the identity, 1 gives zeros).

    Example:
        >>> h = dy.dropout(dy.tanh(W * x + b), 0.3)
    """


@op(formula="y_i = x_i + e_i, e_i ~ N(0, stddev^2)", batch="independent noise per batch element",
    reference=lambda x, stddev: x, random=True,   # E[y] = x
    cases=[Case([(4, 3)], {"stddev": 0.1}, batches=_ELEM_BATCHES, grad=False)], direct=_k.noise)
def noise(x, stddev):
    """Additive Gaussian noise, sampled at forward (train and test alike);
    the gradient passes unchanged.

    Example:
        >>> e = dy.noise(embedding, 0.1)
    """


@op(formula="y = x; dy/dx = 0", batch="per element", reference=lambda x: x,
    # its backward is zero by design, which finite differences cannot agree with
    cases=[Case([(3, 2)], batches=_ELEM_BATCHES, grad=False)], direct=_k.nobackprop)
def nobackprop(x):
    """Identity in forward; no gradient flows back through it.

    Example:
        >>> target = dy.nobackprop(teacher_scores)
    """
