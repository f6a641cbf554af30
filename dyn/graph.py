"""The global computation graph: renew_cg, versions, forward of many nodes."""

from __future__ import annotations

from dyn._core import _expr, _graph


class ComputationGraph:
    """The one global graph (DyNet's singleton); get it with ``dy.cg()``."""

    _instance = None

    def __init__(self, *_args, **_kwargs):
        raise RuntimeError("ComputationGraph is a singleton: use dy.cg() or dy.renew_cg()")

    def renew(self, immediate_compute=False, check_validity=False, autobatching=None):
        return renew_cg(immediate_compute, check_validity, autobatching)

    def version(self):
        return _graph.version()

    def forward(self, expr):
        return expr.forward()

    def backward(self, expr, full=False):
        expr.backward(full)

    def invalidate(self):
        _graph.invalidate()

    def memory_stats(self):
        """Arena capacities and use in bytes (forward, backward), and node count."""
        return _graph.memory_stats()


def cg() -> ComputationGraph:
    if ComputationGraph._instance is None:
        ComputationGraph._instance = object.__new__(ComputationGraph)
    return ComputationGraph._instance


def renew_cg(immediate_compute=False, check_validity=False, autobatching=None):
    """Start a new computation graph; expressions of the old one become stale.

    Args:
        immediate_compute: compute every node as soon as it is created (errors
            then point at the line that built the node).
        check_validity: raise RuntimeError naming the first node whose value
            holds a NaN or Inf.
        autobatching: accepted for DyNet compatibility; automatic batching is
            not implemented yet, so graphs always run node by node.
    """
    _graph.renew(immediate_compute, check_validity)
    return cg()


def cg_version() -> int:
    return _graph.version()


def forward(exprs, recalculate=False):
    """Compute every expression in the list (up to the latest one)."""
    exprs = list(exprs)
    if not exprs:
        return
    if recalculate:
        _graph.invalidate()
    last = max(exprs, key=lambda e: _expr.node_of(e))
    last.forward()


def npvalues(exprs, recalculate=False):
    forward(exprs, recalculate)
    return [e.npvalue() for e in exprs]


def values(exprs, recalculate=False):
    forward(exprs, recalculate)
    return [e.value() for e in exprs]


def cg_checkpoint():
    """Remember the current graph size (stack); cg_revert() drops later nodes."""
    _graph.checkpoint()


def cg_revert():
    """Remove the nodes added since the last cg_checkpoint() (expressions made
    since then must not be used again)."""
    _graph.revert()


def print_graphviz(**kwargs):
    print("Run with --dynet-viz to get the visualization behavior.")
