"""How dyn objects show themselves: in a terminal, and richly in Jupyter.

- An Expression shows its node, op, dim and, once computed, a value summary
  (``repr``); in a notebook also the graph it was computed from.
- ``dy.render(expr)`` draws the computation graph with graphviz: op names,
  the names of the parameters read (``parameter(W)``, ``lookup(E)``), dims,
  optionally values and gradients, and the batches the autobatching engine
  ran coloured (one colour per batch).
- A ParameterCollection shows a table of its parameters (name, shape, count,
  device, norms of value and gradient); a trainer its settings.

Nothing here runs forward or backward: values and gradients are read only from
nodes already computed (``dyn._core.core.expr.peek``). graphviz (the ``graphviz``
package and the ``dot`` program, ``pip install dyn[notebook]``) is optional:
without it the text form is shown.

Example:
    >>> x = dy.inputVector([1.0, 2.0]); y = dy.tanh(x)
    >>> y
    expression 1/7: tanh(N0) {2} (not computed)
    >>> dy.render(y, values=True)          # draws it in a notebook
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np

from dyn._core.core import autobatch as _autobatch
from dyn._core.core import expr as _expr
from dyn._core.core import graph as _graph

# one colour per autobatching batch (cycled); nodes run alone stay white
PALETTE = ("#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462",
           "#b3de69", "#fccde5", "#bc80bd", "#ccebc5", "#ffed6f", "#d9d9d9")  # fmt: skip
# an expression draws its graph in a notebook only up to this many nodes (else: use dy.render)
INLINE_NODES = 60


def summary(v) -> str:
    """A short text of an array: the value for one element, the elements for a
    few, else min/mean/max."""
    v = np.asarray(v, dtype=np.float64)
    if v.size == 1:
        return "%.4g" % v.ravel()[0]
    if v.size <= 6:
        return "[" + ", ".join("%.3g" % x for x in v.ravel(order="F")) + "]"
    return "min %.3g, mean %.3g, max %.3g" % (v.min(), v.mean(), v.max())


def dim_text(dims, bd) -> str:
    return "{%s}" % ",".join(map(str, dims)) + ("x%d" % bd if bd > 1 else "")


# ---------------------------------------------------------------- the graph as data


def _nodes_of(exprs, max_nodes):
    """The node ids to draw (ascending): the whole graph, or the ancestors of exprs."""
    table = _graph.describe(True)
    if exprs is None:
        ids = list(range(len(table)))
    else:
        seen = set()
        stack = [_expr.node_of(e) for e in exprs]
        while stack:
            i = stack.pop()
            if i not in seen:
                seen.add(i)
                stack.extend(table[i][1])
        ids = sorted(seen)
    hidden = max(0, len(ids) - max_nodes)
    return table, ids[hidden:], hidden  # keep the nodes nearest the outputs


_AUTO_NAME = re.compile(r"_\d+")


def _shown_name(p):
    """A parameter's name as the graph shows it ("W", "encoder/W"); None where the user gave no name
    (dyn names those "_0", "_1" ...)."""
    name = p.name().lstrip("/")
    return None if _AUTO_NAME.fullmatch(name.rsplit("/", 1)[-1]) else name


def _param_names(table):
    """node id -> the name of the parameter or lookup table the node reads, where the user named it."""
    out = {}
    for i, p in _expr.node_parameters().items():
        name = _shown_name(p)
        if name is not None and i < len(table):
            out[i] = name
    return out


def _batch_of():
    """node id -> index of the autobatching batch it ran in (current graph only)."""
    out = {}
    for b, members in enumerate(_autobatch.batches()):
        for i in members:
            if i >= 0:
                out[i] = b
    return out


def _node_lines(i, table, values, gradients, names):
    op, args, (dims, bd) = table[i]
    what = names[i] if i in names else ", ".join("N%d" % a for a in args)  # a parameter: its name
    lines = ["N%d = %s(%s)" % (i, op, what), dim_text(dims, bd)]
    computed = _expr.peek(i, False) is not None
    if values and computed:
        lines.append("value " + summary(_expr.peek(i, False)))
    if gradients:
        g = _expr.peek(i, True)
        if g is not None:
            lines.append("grad " + summary(g))
    return lines, computed


def _dot_quote(s):
    return s.replace("\\", "\\\\").replace('"', '\\"')


def to_dot(exprs=None, values=False, gradients=False, batches=True, max_nodes=300) -> str:
    """Graphviz dot source of the current graph (or of what exprs depend on)."""
    table, ids, hidden = _nodes_of(exprs, max_nodes)
    batch = _batch_of() if batches else {}
    names = _param_names(table)
    shown = set(ids)
    out = ["digraph G {", "  rankdir=BT;", '  node [shape=box, style="rounded,filled", fillcolor=white,'
           ' fontname="Helvetica", fontsize=10];']  # fmt: skip
    for i in ids:
        lines, computed = _node_lines(i, table, values, gradients, names)
        attrs = ['label="%s"' % "\\n".join(_dot_quote(s) for s in lines)]
        if i in batch:
            attrs.append('fillcolor="%s"' % PALETTE[batch[i] % len(PALETTE)])
            attrs.append('tooltip="batch %d"' % batch[i])
        if not computed:
            attrs.append('style="rounded,dashed"')
        out.append("  N%d [%s];" % (i, ", ".join(attrs)))
        out.extend("  N%d -> N%d;" % (a, i) for a in table[i][1] if a in shown)
    notes = []
    if batch:
        notes.append("colour: batch of the autobatching engine (%d batches)" % (max(batch.values()) + 1))
    if hidden:
        notes.append("%d earlier nodes not shown (max_nodes=%d)" % (hidden, max_nodes))
    if notes:
        out.append('  label="%s"; fontsize=10;' % _dot_quote("; ".join(notes)))
    out.append("}")
    return "\n".join(out)


def to_text(exprs=None, values=False, gradients=False, batches=True, max_nodes=300) -> str:
    """The same graph as plain text, one node a line (what shows without graphviz)."""
    table, ids, hidden = _nodes_of(exprs, max_nodes)
    batch = _batch_of() if batches else {}
    names = _param_names(table)
    out = ["(%d earlier nodes not shown)" % hidden] if hidden else []
    for i in ids:
        lines, computed = _node_lines(i, table, values, gradients, names)
        extra = ([] if computed else ["not computed"]) + (["batch %d" % batch[i]] if i in batch else [])
        out.append("  ".join(lines + extra))
    return "\n".join(out)


def dot_to_svg(source):
    """SVG text of a dot source, or None without graphviz (package or dot program)."""
    try:
        import graphviz
    except ImportError:
        graphviz = None
    if graphviz is not None:
        try:
            return graphviz.Source(source).pipe(format="svg", encoding="utf-8")
        except graphviz.ExecutableNotFound:
            return None
    dot = shutil.which("dot")
    if dot is None:
        return None
    return subprocess.run([dot, "-Tsvg"], input=source, capture_output=True, text=True, check=True).stdout


class Rendering:
    """A drawn graph: ``source`` (dot), ``text``, ``svg()``; shows itself in a
    notebook as SVG (or as text without graphviz)."""

    def __init__(self, source, text):
        self.source, self.text = source, text
        self._svg = None

    def svg(self):
        """The SVG text; RuntimeError when graphviz is missing."""
        if self._svg is None:
            self._svg = dot_to_svg(self.source)
        if self._svg is None:
            raise RuntimeError(
                "render: graphviz is not installed (pip install graphviz, and the dot program)"
            )
        return self._svg

    def _repr_svg_(self):
        try:
            return self.svg()
        except RuntimeError:
            return None

    def __repr__(self):
        return self.text

    def save(self, path):
        """Write the SVG (path ending .svg) or the dot source (else) atomically."""
        data = self.svg() if str(path).endswith(".svg") else self.source
        d = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".render-")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise


def render(expr=None, *, values=False, gradients=False, batches=True, max_nodes=300) -> Rendering:
    """Draw the current computation graph, or the part an expression depends on.

    Never runs forward or backward: values and gradients appear for nodes
    already computed; nodes not computed are drawn dashed.

    Args:
        expr: an Expression, a list of them, or None (the whole graph).
        values: show each computed node's value (summarised).
        gradients: show each node's gradient once backward() covered it.
        batches: colour the nodes by the autobatching batch they ran in.
        max_nodes: draw at most this many nodes (those nearest the outputs).

    Returns:
        A Rendering: shows as SVG in a notebook; ``.source`` is the dot text.
    """
    exprs = None if expr is None else (list(expr) if isinstance(expr, (list, tuple)) else [expr])
    kw = dict(values=values, gradients=gradients, batches=batches, max_nodes=max_nodes)
    return Rendering(to_dot(exprs, **kw), to_text(exprs, **kw))


# ---------------------------------------------------------------- expressions


def expression_text(e) -> str:
    nid, ver, alive = e._node_ref()
    if not alive:
        return "expression %d/%d (stale: its graph was renewed or its node reverted)" % (nid, ver)
    op, args, (dims, bd) = _graph.describe(True)[nid]
    v = _expr.peek(nid, False)
    what = "= " + summary(v) if v is not None else "(not computed)"
    return "expression %d/%d: %s(%s) %s %s" % (
        nid, ver, op, ", ".join("N%d" % a for a in args), dim_text(dims, bd), what)  # fmt: skip


_CACHE = {}  # the last inline drawing: notebooks ask for SVG and HTML of one object in a row


def expression_svg(e):
    nid, _ver, alive = e._node_ref()
    if not alive:
        return None
    key = (_graph.stamp(), _expr.graph_state(), nid)
    if key not in _CACHE:
        _CACHE.clear()
        table, ids, hidden = _nodes_of([e], INLINE_NODES)
        _CACHE[key] = None if hidden else dot_to_svg(to_dot([e], values=True, gradients=True))
    return _CACHE[key]


def expression_html(e) -> str:
    out = "<code>%s</code>" % html.escape(expression_text(e))
    svg = expression_svg(e)
    if svg is not None:
        out += "<div>%s</div>" % svg[svg.find("<svg") :]
    return "<div>%s</div>" % out


# ---------------------------------------------------------------- collections and trainers


def parameter_rows(pc):
    """One dict per parameter of a collection: name, kind, shape, count, device,
    dtype, value norm, gradient norm."""
    rows = []
    for p in pc.parameters_list() + pc.lookup_parameters_list():
        rows.append({
            "name": p.name(), "kind": "lookup" if p.is_lookup else "param",
            "shape": tuple(p.shape()), "count": int(p.size), "device": "CPU",
            "dtype": str(p.value_view().dtype),
            "norm": float(np.linalg.norm(np.asarray(p.value_view(), dtype=np.float64))),
            "grad_norm": float(np.linalg.norm(np.asarray(p.grad_view(), dtype=np.float64))),
        })  # fmt: skip
    return rows


_COLS = ("name", "kind", "shape", "count", "device", "dtype", "norm", "grad_norm")


def _cell(v):
    return "%.4g" % v if isinstance(v, float) else str(v)


def collection_text(pc) -> str:
    rows = parameter_rows(pc)
    head = "ParameterCollection %s: %d parameters, %d values" % (pc.name(), len(rows), pc.parameter_count())
    table = [_COLS] + [tuple(_cell(r[c]) for c in _COLS) for r in rows]
    widths = [max(len(t[k]) for t in table) for k in range(len(_COLS))]
    return "\n".join([head] + ["  ".join(s.ljust(w) for s, w in zip(t, widths)) for t in table])


def _html_table(caption, header, rows):
    th = "".join("<th>%s</th>" % html.escape(h) for h in header)
    body = "".join("<tr>%s</tr>" % "".join("<td>%s</td>" % html.escape(_cell(v)) for v in r) for r in rows)
    return "<table><caption>%s</caption><tr>%s</tr>%s</table>" % (html.escape(caption), th, body)


def collection_html(pc) -> str:
    rows = parameter_rows(pc)
    cap = "ParameterCollection %s: %d parameters, %d values" % (pc.name(), len(rows), pc.parameter_count())
    return _html_table(cap, _COLS, [[r[c] for c in _COLS] for r in rows])


def trainer_settings(t) -> dict:
    d = {"trainer": t.whoami(), "learning_rate": t.learning_rate,
         "clip_threshold": t.clip_threshold if t.clipping_enabled else "off",
         "sparse_updates": t.sparse_updates, "exact_sparse": t._hyper.exact, "l2": t.get_l2(),
         "weight_decay": t.model.get_weight_decay(), "updates": t.updates, "clips": t.clips}  # fmt: skip
    d.update(getattr(t, "_consts", {}))
    norms = t.grad_norm_history()
    if len(norms):
        d["last_grad_norm"] = float(norms[-1])
    return d


def trainer_text(t) -> str:
    return "%s(%s)" % (t.whoami(), ", ".join("%s=%s" % (k, _cell(v)) for k, v in trainer_settings(t).items()))


def trainer_html(t) -> str:
    s = trainer_settings(t)
    return _html_table(s.pop("trainer"), ("setting", "value"), list(s.items()))
