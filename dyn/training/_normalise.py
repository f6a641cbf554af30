"""Loss normalisation: the same learning rate for short and long sentences,
small and large minibatches.

A summed loss grows with the number of tokens or examples, so the gradient (and
the right learning rate and clipping threshold) would too; dividing by that
number keeps the gradient's scale independent of it.

Example:
    loss = dy.esum([dy.pickneglogsoftmax(s, t) for s, t in zip(scores, tags)])
    loss = training.per_length(loss, len(tags))      # mean loss per token
"""

from __future__ import annotations

from dyn._core.core.expr import Expression
from dyn.ops._registry import REGISTRY


def _check_loss(what, loss):
    if not isinstance(loss, Expression):
        raise TypeError("%s: expected an Expression, got %s" % (what, type(loss).__name__))


def per_length(loss, length):
    """The loss divided by a length (tokens of a sentence, summed over them).

    Args:
        loss: a loss Expression summed over `length` items.
        length: the number of items, > 0.
    """
    _check_loss("per_length", loss)
    if not length or length <= 0:
        raise ValueError("per_length: the length must be > 0, got %r (loss dim %s)" % (length, loss.dim()))
    return loss * (1.0 / float(length))


def per_batch(loss, batch_size=None):
    """The mean loss of a minibatch.

    A batched loss (batch dimension > 1) is summed over its batch first
    (``sum_batches``) and divided by its batch size; a scalar loss summed over
    a minibatch by hand is divided by ``batch_size``.

    Args:
        loss: a batched loss, or a scalar summed over batch_size examples.
        batch_size: required for a scalar loss; for a batched loss it must
            match its batch dimension when given.
    """
    _check_loss("per_batch", loss)
    dims, bd = loss.dim()
    if bd > 1:
        if batch_size is not None and batch_size != bd:
            raise ValueError(
                "per_batch: batch_size %r for a loss of dim %s with batch %d" % (batch_size, dims, bd)
            )
        loss, batch_size = REGISTRY["sum_batches"].fn(loss), bd
    elif batch_size is None or batch_size <= 0:
        raise ValueError(
            "per_batch: a scalar loss (dim %s) needs batch_size > 0, got %r" % (dims, batch_size)
        )
    return loss * (1.0 / float(batch_size))


def mean(losses):
    """The mean of a list of loss Expressions (each example's loss counts once)."""
    losses = list(losses)
    if not losses:
        raise ValueError("mean: no losses given")
    return REGISTRY["esum"].fn(losses) * (1.0 / len(losses))
