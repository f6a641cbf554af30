"""Random sampling and the dropout variants with shared masks (compiled in
dyn/_core/ops/random.pyx and dyn/_core/cpu/random.pyx).

Samples are drawn at forward from the graph's generator, so
``dy.reset_random_seed(s)`` (or ``dyn.init(random_seed=s)``) before building
and evaluating gives the same numbers again. The leaves take no expression:
they are constants (no gradient). The statistics, seeding and mask sharing
are tested in tests/ops/test_random.py.
"""

from __future__ import annotations

from dyn._core.ops import random as _k
from dyn.ops import _check
from dyn.ops._registry import Case, op
from dyn.ops.inputs import _shape_of

# The leaves have no expression arguments: the generated tests run them once
# (shape and finiteness; they are random); their statistics are tested in
# tests/ops/test_random.py.
_LEAF = ("none",)  # no expression arguments: one configuration
_ELEM = ("none", "all")


def _number(v, op_name, what):
    return _check.number(v, op_name, what)


def _leaf(kind, op_name, dim, batch_size, a, b):
    shape = _shape_of(dim, op_name)
    batch_size = _check.integer(batch_size, op_name, "batch_size")  # its range: the shape check
    try:
        return _k.sample(kind, shape, batch_size, a, b)
    except (TypeError, ValueError) as e:
        raise type(e)("%s: %s" % (op_name, e)) from None


def _probability(p, op_name):
    p = _number(p, op_name, "p")
    if not 0.0 <= p <= 1.0:
        raise ValueError("%s: p must be in [0, 1], got %r" % (op_name, p))
    return p


@op(
    formula="y_i ~ N(mean, stddev^2)",
    batch="batch_size independent samples",
    reference=None,
    random=True,
    cases=[Case([], {"dim": (3, 2), "mean": 1.0, "stddev": 2.0}, batches=_LEAF)],
)
def random_normal(dim, mean=0.0, stddev=1.0, batch_size=1):
    """A tensor of independent normal samples, drawn afresh at each forward.

    Args:
        dim: int or tuple of ints.
        mean: the mean.
        stddev: the standard deviation (>= 0).
        batch_size: number of batch elements.

    Example:
        >>> eps = dy.random_normal((64,), batch_size=32)
        >>> z = mu + dy.cmult(dy.exp(logvar * 0.5), eps)
    """
    stddev = _number(stddev, "random_normal", "stddev")
    if not stddev >= 0.0:
        raise ValueError("random_normal: stddev must be >= 0, got %r" % stddev)
    return _leaf(0, "random_normal", dim, batch_size, _number(mean, "random_normal", "mean"), stddev)


@op(
    formula="y_i = scale with probability p, else 0",
    batch="batch_size independent samples",
    reference=None,
    random=True,
    cases=[Case([], {"dim": 5, "p": 0.3, "scale": 2.0}, batches=_LEAF)],
)
def random_bernoulli(dim, p, scale=1.0, batch_size=1):
    """A tensor of independent Bernoulli(p) samples times ``scale``.

    Args:
        dim: int or tuple of ints.
        p: probability of ``scale`` (in [0, 1]).
        scale: the value of a success.
        batch_size: number of batch elements.

    Example:
        >>> mask = dy.random_bernoulli((100,), 0.8, scale=1 / 0.8)
    """
    p = _probability(p, "random_bernoulli")
    return _leaf(1, "random_bernoulli", dim, batch_size, p, _number(scale, "random_bernoulli", "scale"))


@op(
    formula="y_i ~ U(left, right)",
    batch="batch_size independent samples",
    reference=None,
    random=True,
    cases=[Case([], {"dim": (2, 2), "left": -1.0, "right": 3.0}, batches=_LEAF)],
)
def random_uniform(dim, left, right, batch_size=1):
    """A tensor of independent uniform samples on (left, right).

    Args:
        dim: int or tuple of ints.
        left: lower bound.
        right: upper bound.
        batch_size: number of batch elements.

    Example:
        >>> u = dy.random_uniform((10,), -0.1, 0.1)
    """
    left = _number(left, "random_uniform", "left")
    return _leaf(2, "random_uniform", dim, batch_size, left, _number(right, "random_uniform", "right"))


@op(
    formula="y_i = mu - beta log(-log u_i), u_i ~ U(0, 1)",
    batch="batch_size independent samples",
    reference=None,
    random=True,
    cases=[Case([], {"dim": 4}, batches=_LEAF)],
)
def random_gumbel(dim, mu=0.0, beta=1.0, batch_size=1):
    """A tensor of independent Gumbel(mu, beta) samples (the Gumbel-max trick).

    DyNet only accepts mu = 0, beta = 1; any location and scale >= 0 work here.

    Args:
        dim: int or tuple of ints.
        mu: location.
        beta: scale (>= 0).
        batch_size: number of batch elements.

    Example:
        >>> sample = np.argmax((logits + dy.random_gumbel((n,))).npvalue())
    """
    beta = _number(beta, "random_gumbel", "beta")
    if not beta >= 0.0:
        raise ValueError("random_gumbel: beta must be >= 0, got %r" % beta)
    return _leaf(3, "random_gumbel", dim, batch_size, _number(mu, "random_gumbel", "mu"), beta)


@op(
    formula="y = x * m / (1 - p), m ~ Bernoulli(1 - p) shared along dim d",
    batch="independent mask per batch element",
    reference=lambda x, d, p: x,
    random=True,
    cases=[
        Case([(4, 3)], {"d": 0, "p": 0.5}, batches=_ELEM, grad=False),
        Case([(2, 3, 2)], {"d": 2, "p": 0.3}, batches=_ELEM, grad=False),
    ],
)
def dropout_dim(x, d, p):
    """Dropout whose mask is the same along dimension ``d``: with x a matrix,
    d = 0 drops whole columns and d = 1 whole rows. Kept entries are scaled
    by 1 / (1 - p); backward multiplies by the same mask.

    Args:
        x: an expression of order <= 3 (plus batch).
        d: the dimension the mask is shared along (< the order of x).
        p: drop probability in [0, 1] (0: identity, 1: zeros).

    Example:
        >>> h = dy.dropout_dim(embeddings, 1, 0.2)   # drop whole rows (features)
    """
    d = _check.integer(d, "dropout_dim", "d")
    if not 0 <= d < 7:
        raise ValueError("dropout_dim: d must be a dimension index in [0, 3), got %d" % d)
    return _k.dropout_shared(0, x, _probability(p, "dropout_dim"), int(d))


@op(
    formula="y_b = x_b * m_b / (1 - p), m_b ~ Bernoulli(1 - p) per batch element",
    batch="one mask value per batch element",
    reference=lambda x, p: x,
    random=True,
    cases=[Case([(4, 3)], {"p": 0.5}, batches=_ELEM, grad=False)],
)
def dropout_batch(x, p):
    """Dropout of whole batch elements: each is kept (scaled by 1 / (1 - p))
    or zeroed, with one draw per batch element.

    Args:
        x: any expression.
        p: drop probability in [0, 1].

    Example:
        >>> h = dy.dropout_batch(dy.lookup_batch(E, words), 0.1)
    """
    return _k.dropout_shared(1, x, _probability(p, "dropout_batch"))


@op(
    formula="y = x * m / (1 - p), one m ~ Bernoulli(1 - p) for the whole tensor",
    batch="unbatched only (ValueError for a batched x)",
    reference=lambda x, p: x,
    random=True,
    cases=[Case([(3, 2)], {"p": 0.5}, batches=("none",), grad=False)],
)
def block_dropout(x, p):
    """Drop the whole tensor at once: all of it kept (scaled by 1 / (1 - p))
    or all of it zero.

    Args:
        x: an unbatched expression.
        p: drop probability in [0, 1].

    Example:
        >>> h = dy.block_dropout(attention_context, 0.1)
    """
    return _k.dropout_shared(2, x, _probability(p, "block_dropout"))
