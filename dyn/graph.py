"""The global computation graph: renew_cg, versions, forward of many nodes."""

from __future__ import annotations

import sys

import numpy as np

from dyn._core.core import autobatch as _autobatch
from dyn._core.core import expr as _expr
from dyn._core.core import graph as _graph


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
        autobatching: True runs this graph through the automatic batching
            engine (nodes of many examples with the same signature run as one
            batched node; see docs/autobatching.md), False node by node, None
            (default) as the global setting (``--dynet-autobatch 1`` or
            ``dyn.init(autobatch=True)``).
    """
    if autobatching is None:
        from dyn._config import state

        autobatching = state["autobatch"]
    _graph.renew(immediate_compute, check_validity, bool(autobatching))
    return cg()


def autobatch_stats(reset=False):
    """What the autobatching engine did since the last reset.

    Returns a dict: ``forward_calls``, ``nodes`` (scheduled), ``batches``
    (of two or more nodes), ``batched_nodes`` (nodes inside them), ``singles``
    (nodes run alone); how the batches' concatenated arguments were passed:
    ``args_in_place`` (already adjacent), ``args_per_member`` (element pointers,
    for kernels that read them one by one) and ``args_gathered`` (copied, with
    ``gathered_bytes``); ``schedule_s`` (seconds the engine spent outside the
    kernels: signatures, agenda, gathering and scattering; also split into
    ``forward_schedule_s`` and ``backward_schedule_s``), ``forward_s`` and
    ``backward_s`` (whole engine time, kernels included). The engine times its
    kernels, which the scheduling seconds need, from the first call of this
    function on (reading the clock around every kernel costs time of its own).
    ``plan_replays`` counts forward passes that replayed the batches of an
    earlier graph recording the same (see docs/autobatching.md, "Plans of
    repeated graphs"), ``plans_stored`` how many such plans are kept now, and
    ``plan_rests`` how many times the engine stopped recording plans for a while
    because too few of those it had stored were replayed; ``plain_runs`` counts
    forward passes run in node order, without the agenda, because an earlier
    graph of their shape ran no batch and drew no random number, and
    ``plain_shapes`` how many such shapes are known.
    """
    return _autobatch.stats(reset)


def cg_version() -> int:
    return _graph.version()


def forward(exps, recalculate=False):
    """Compute every expression in the list (up to the latest one)."""
    exps = list(exps)
    if not exps:
        return
    if recalculate:
        _graph.invalidate()
    last = max(exps, key=lambda e: _expr.node_of(e))
    last.forward()


def npvalues(exps, recalculate=False):
    forward(exps, recalculate)
    return [e.npvalue() for e in exps]


def values(exps, recalculate=False):
    forward(exps, recalculate)
    return [e.value() for e in exps]


def cg_checkpoint():
    """Remember the current graph size (stack); cg_revert() drops later nodes."""
    _graph.checkpoint()


def cg_revert():
    """Remove the nodes added since the last cg_checkpoint(). Expressions made
    since then are dead: using one raises (``e.is_alive()`` tells), even after
    a new node has taken its id. Builders make what they cached since then
    again."""
    _graph.revert()


def print_graphviz(**kw):
    print("Run with --dynet-viz to get the visualization behavior.")


def print_text_graphviz():
    """Print the current graph in Graphviz dot format to stderr."""
    lines = ["digraph G {", "  rankdir=LR;", "  nodesep=.05;"]
    for i, (op, args, (dims, bd)) in enumerate(_graph.describe(True)):
        shape = "{%s}" % ",".join(map(str, dims)) + ("x%d" % bd if bd > 1 else "")
        lines.append('  N%d [label="N%d = %s %s"];' % (i, i, op, shape))
        lines.extend("  N%d -> N%d;" % (a, i) for a in args)
    lines.append("}")
    sys.stderr.write("\n".join(lines) + "\n")


def dump_cg(filename="", show_values=True, show_gradients=True, nan_check_only=False):
    """Write every node (op, dim, and its value/gradient) to a file or stderr.

    With nan_check_only, only whether each value/gradient holds NaN or Inf.
    """
    out = []
    for i, (op, args, (dims, bd)) in enumerate(_graph.describe(True)):
        e = _expr.wrap_node(i)
        out.append("node %d: %s(%s) dim %r batch %d" % (i, op, ", ".join("N%d" % a for a in args), dims, bd))
        parts = [("value", show_values, lambda e=e: e.npvalue())]
        parts.append(("gradient", show_gradients, lambda e=e: e.gradient()))
        for label, wanted, get in parts:
            if not wanted:
                continue
            try:
                v = get()
            except RuntimeError:
                continue  # no value/gradient computed for this node
            if nan_check_only:
                out.append("  %s: %s" % (label, "NaN/Inf" if not np.all(np.isfinite(v)) else "ok"))
            else:
                out.append("  %s: %s" % (label, np.array2string(np.asarray(v), threshold=50)))
    text = "\n".join(out) + "\n"
    if filename:
        with open(filename, "w") as f:
            f.write(text)
    else:
        sys.stderr.write(text)
