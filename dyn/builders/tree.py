"""Tree builders: Tree-LSTMs and the recursive tree RNN, driven from recursive Python.

DyNet had these in C++ only (NaryTreeLSTMBuilder, BidirectionalTreeLSTMBuilder,
UnidirectionalTreeLSTMBuilder); dyn gives them a Python face, adds the
child-sum Tree-LSTM and the tree RNN of the DyNet paper's Figure 2, and runs
each tree node of the LSTMs and the RNN as one fused graph node
(dy.nary_tree_lstm, dy.child_sum_tree_lstm, dy.tree_rnn).

Two ways to drive a builder, mixed freely:

* Pythonic: ``builder.add_input(x)`` makes a leaf and ``builder.compose(children,
  x=None)`` a parent; both return a :class:`TreeState` (``output()``, ``h()``,
  ``s()``, ``children()``). ``builder.encode(tree)`` walks nested lists/tuples
  whose leaves are Expressions::

      def encode(tree):
          if tree.is_leaf():
              return lstm.add_input(E[tree.word])
          return lstm.compose([encode(child) for child in tree.children])
      loss = dy.pickneglogsoftmax(V * encode(tree).output(), label)

* DyNet's C++ style: ``h = builder.add_input(id, children_ids, x)`` with ids
  0, 1, 2 ... in order (children are earlier ids); returns the node's h.
  A new computation graph or ``start_new_sequence()`` starts numbering again.

Batches: every input may be a batch (``dy.lookup_batch``); a tree built from
batched leaves is a batch of trees of the same shape, with per-element
dropout masks. Unbatched and batched children mix (batch 1 broadcasts).

The N-ary Tree-LSTM (Tai et al. 2015, section 3.2), per layer
==============================================================

N child positions; child j uses the weight block ``e_j = min(j, N-1)`` (DyNet:
children past the N-th share the last block). With ``[h_j; c_j]`` the
children's states::

    a   = b + Wx x + sum_j U[:, e_j] h_j      (+ sum_j Uc[:, e_j] c_j with cell_terms)
    i = sig(a_i), o = sig(a_o), u = tanh(a_u), f_m = sig(a_{f_m} + forget_bias)
    c   = i * u + sum_j f_{e_j} * c_j,   h = o * tanh(c)

A leaf (no children) uses the x terms only (c = i * u). Layer l > 0 reads the
h of layer l-1 as its x. Parameters per layer: Wx {(3+N)H, in}, U {(3+N)H, NH},
b {(3+N)H}, gate rows ``[i; o; u; f_0 .. f_{N-1}]`` (one matrix product gives
all gates of a node); with ``cell_terms=True`` also Uc {(2+N)H, NH}, rows
``[i; o; f_0 ..]``: DyNet's NaryTreeLSTMBuilder exactly (it adds the children's
cells to i, o and the f, not to u). Tai et al. and DyNet's own examples and
benchmarks leave the cell terms out, as dyn does by default.

The child-sum Tree-LSTM (Tai et al., section 3.1)
=================================================

For unordered children of any number::

    h~ = sum_j h_j;   i, o, u = sig, sig, tanh of (b + Wx x + U h~)
    f_j = sig(b_f + Wx_f x + U_f h_j + forget_bias);   c = i * u + sum_j f_j * c_j;   h = o * tanh(c)

Parameters per layer: Wx {4H, in}, U {4H, H}, b {4H}, rows ``[i; o; u; f]``.

Training options (both LSTMs)
=============================

* ``forget_bias`` (default 1.0, DyNet's +1): added to every forget gate's
  pre-activation. Keeps the children's cells flowing up at the start of
  training; use 0 only to reproduce a model trained without it.
* ``set_dropout(d)`` / ``set_dropouts(d, d_h)``: variational dropout (Gal &
  Ghahramani) with masks tied over the whole graph: x (each layer's input)
  times a mask z_x, every child's h times z_h (its c is left alone, as in
  DyNet's LSTMs). Use it on small data sets, where tree models overfit fast;
  0.1-0.3 is typical. ``disable_dropout()`` for evaluation;
  ``set_dropout_masks(batch_size)`` samples the masks now.
* ``ln_lstm=True`` (N-ary only): layer normalisation as DyNet's VanillaLSTM:
  ``a = b + LN(Wx x; g_x, b_x) + LN(U hc; g_h, b_h)`` over the rows the node
  computes, ``h = o * tanh(LN(c; g_c, b_c))``. For deep trees or large hidden
  sizes, where pre-activations drift; it runs composed from plain operations
  (slower than the fused node).

The tree RNN (DyNet paper, Figure 2) and the sequence-LSTM tree builders are
in dyn/builders/tree_rnn.py.
"""

from __future__ import annotations

import numpy as np

import dyn as dy
from dyn import graph as _graph
from dyn import io as _io
from dyn._core.core.expr import all_alive
from dyn._core.core.graph import stamp as _cg_stamp
from dyn._core.core.graph import version as _cg_version
from dyn._core.ops import treelstm as _k
from dyn.builders._rnn_base import as_dim

__all__ = ["TreeState", "NaryTreeLSTMBuilder", "ChildSumTreeLSTMBuilder"]


def check_rate(p):
    p = float(p)
    if not 0.0 <= p < 1.0:
        raise ValueError("dropout rate must be in [0, 1), got %r" % p)
    return p


def glorot_blocks(rows, cols, row_block, col_block):
    """A {rows, cols} matrix of Glorot-uniform blocks of {row_block, col_block}:
    each gate of each child position starts at its own scale, as DyNet's
    separate per-gate matrices did."""
    init = dy.GlorotInitializer()
    out = np.empty((rows, cols))
    for r in range(0, rows, row_block):
        for c in range(0, cols, col_block):
            out[r : r + row_block, c : c + col_block] = init.initialize((row_block, col_block))
    return out


# A tree node's state (output(), h(), s(), packed(), children(), b()): a Cython class, made once
# per tree node (dyn/_core/ops/treelstm.pyx).
TreeState = _k.TreeState


class _PerGraph:
    """A builder's expressions and dropout masks in one computation graph."""

    __slots__ = ("version", "update", "exprs", "masks", "table", "fused", "stamp")

    def __init__(self, update):
        self.version, self.update, self.stamp = _graph.cg_version(), update, _cg_stamp()
        self.exprs, self.masks, self.table, self.fused = None, None, [], None


class TreeBuilderBase:
    """What the tree builders share: the two driving styles, per-graph
    parameter expressions, dropout settings, saving. Subclasses define
    ``_make_exprs(update)``, ``_node(children, x, graph)`` and ``spec``."""

    _collection = "tree-builder"
    _has_cell = False
    _one_fused_node = False  # compose's fast path (_k.compose_fused) applies
    _dropout_layers = 1

    def _setup(self, model):
        self.model = model.add_subcollection(self._collection)
        self.rates = {"x": 0.0, "h": 0.0}
        self._cg = None

    # -------- graph
    def new_graph(self, update=True):
        """Start using this builder in the current graph (done on first use).

        Args:
            update: False reads the parameters as constants (no gradient) in
                this graph.
        """
        self._cg = _PerGraph(bool(update))
        self._cg.exprs = self._make_exprs(bool(update))
        return self

    def _graph(self):
        g = self._live_graph()
        if g is None:
            self.new_graph(True if self._cg is None or self._cg.version != _cg_version() else self._cg.update)
            g = self._cg
        return g

    def _live_graph(self):
        """This graph's expressions and masks, or None when there are none in this
        graph. After a cg_revert() that dropped the parameter expressions they are
        made again (with the same update flag); dropped masks are sampled again."""
        g = self._cg
        if g is None or g.stamp == _cg_stamp():
            return g
        if g.version != _cg_version() or not all_alive(g.exprs):
            return None
        if not all_alive(g.masks):
            g.masks = None
        g.stamp = _cg_stamp()
        return g

    def start_new_sequence(self, h0=None):
        """DyNet's: restart the numbering of ``add_input(id, children, x)``."""
        if h0:
            raise ValueError("%s: tree builders take no initial state" % type(self).__name__)
        self._graph().table = []

    def set_num_elements(self, n):
        """DyNet's (pre-sizes its tables); nothing to do in dyn."""
        as_dim(n, "set_num_elements: n")

    # -------- building
    def add_input(self, *args):
        """A leaf, or DyNet's numbered node.

        ``add_input(x)`` returns the TreeState of a leaf with input x.
        ``add_input(id, children, x)`` (DyNet's C++ API) adds node ``id``
        (0, 1, 2 ... in order) whose children are the earlier ids in the list
        ``children``, and returns its h.
        """
        if len(args) == 1:
            return self.compose((), args[0])
        if len(args) != 3:
            raise TypeError("add_input takes x, or (id, children, x); got %d arguments" % len(args))
        nid, kids, x = args
        g = self._graph()
        if not isinstance(nid, (int, np.integer)) or nid != len(g.table):
            raise ValueError(
                "add_input: ids must be added in order 0, 1, 2 ...: expected %d, got %r" % (len(g.table), nid)
            )
        for k in kids:
            if not isinstance(k, (int, np.integer)) or not 0 <= k < nid:
                raise ValueError(
                    "add_input: child ids must be earlier nodes (0 .. %d), got %r" % (nid - 1, k)
                )
        state = self.compose([g.table[k] for k in kids], x)
        g.table.append(state)
        return state.output()

    def compose(self, children, x=None):
        """The TreeState of a node with the given child states (in order) and
        an optional input x (an Expression, batched or not)."""
        g = self._cg
        if g is None or g.stamp != _cg_stamp():      # (_graph's own first test, inline: once a node)
            g = self._graph()
        if self._one_fused_node and not (self.rates["x"] or self.rates["h"]):  # the common case
            return _k.compose_fused(
                self, g.version, children, x, self._mode, g.fused or self._fused(g), self.forget_bias
            )
        return self._node(_k.check_compose(self, g.version, children, x), x, g)

    def encode(self, tree):
        """The TreeState of a tree given as nested lists/tuples whose leaves are Expressions.

        Example:
            >>> root = builder.encode([E[3], [E[1], E[4]]])   # (w3 (w1 w4))
        """
        if isinstance(tree, dy.Expression):
            return self.add_input(tree)
        return self.compose([self.encode(t) for t in tree])

    # -------- dropout
    def set_dropout(self, d):
        """Variational dropout at rate d on each layer's input and on the children's h."""
        self.rates["x"] = self.rates["h"] = check_rate(d)

    def set_dropouts(self, d, d_h):
        """Separate rates for the inputs (d) and the children's h (d_h)."""
        self.rates["x"], self.rates["h"] = check_rate(d), check_rate(d_h)

    def disable_dropout(self):
        self.rates["x"] = self.rates["h"] = 0.0

    def set_dropout_masks(self, batch_size=1):
        """Sample this graph's masks now, for batch_size (else at the first node)."""
        self._graph().masks = self._make_masks(as_dim(batch_size, "batch_size", 1))

    def _masks(self, g, x, children):
        if not (self.rates["x"] or self.rates["h"]):
            return None
        if g.masks is None:
            bd = x.dim()[1] if x is not None else children[0]._s[0].dim()[1]
            g.masks = self._make_masks(bd)
        return g.masks

    def _make_masks(self, bd):
        """Per layer: (mask on x, mask on a child's state vector), None where the rate is 0."""
        out, H = [], self.hidden_dim
        for layer in range(self._dropout_layers):
            in_dim = self._input_size(layer)
            zx = zh = None
            if self.rates["x"] and in_dim:
                zx = dy.random_bernoulli((in_dim,), 1 - self.rates["x"], 1 / (1 - self.rates["x"]), bd)
            if self.rates["h"]:
                zh = dy.random_bernoulli((H,), 1 - self.rates["h"], 1 / (1 - self.rates["h"]), bd)
                if self._has_cell:  # the child's c is not dropped
                    zh = dy.concatenate([zh, dy.ones((H,))])
            out.append((zx, zh))
        return out

    def _input_size(self, layer):
        return self.input_dim if layer == 0 else self.hidden_dim

    @staticmethod
    def _drop(e, mask):
        return e if mask is None or e is None else dy.cmult(e, mask)

    # -------- parameters and saving
    def param_collection(self):
        return self.model

    def get_parameter_expressions(self):
        """The parameters' expressions in the current graph (same layout as get_parameters)."""
        if self._live_graph() is None:
            raise ValueError(
                "get_parameter_expressions: use the builder (or call new_graph()) in this graph first"
            )
        return self._expr_lists()

    def whoami(self):
        return type(self).__name__

    @classmethod
    def from_spec(cls, spec, model):
        args, opts = spec
        return cls(*args, model, **opts)


class _LSTMTreeBase(TreeBuilderBase):
    """Stacked Tree-LSTM layers over a fused node op."""

    _has_cell = True

    def _expr_lists(self):
        return [[e[k] for k in self._names] for e in self._cg.exprs]

    def get_parameters(self):
        """Per layer, the list [Wx, U, b] (N-ary with cell terms: [Wx, U, b, Uc])."""
        return [[p[k] for k in self._names] for p in self._params]

    def _make_exprs(self, update):
        # the fused nodes defer their weight products to one tree_weights node
        # per matrix (a few matrix products per tree, see dyn/_core/cpu/treeweights.pyx)
        out = []
        for p in self._params:
            e = {k: v.expr(update) for k, v in p.items()}
            if not getattr(self, "ln_lstm", False):
                for k in ("Wx", "U", "Uc"):
                    if k in e:
                        e[k] = _k.tree_weights(e[k])
            out.append(e)
        return out

    @property
    def _state_dim(self):
        return self.hidden_dim

    @property
    def _dropout_layers(self):
        return self.layers

    def _fused(self, g):
        """compose's one-layer fused case: this graph's (Wx, U, b, Uc or None)."""
        e = g.exprs[0]
        g.fused = (e["Wx"], e["U"], e["b"], e.get("Uc"))
        return g.fused

    def _node(self, children, x, g):
        masks = self._masks(g, x, children)
        states, inp = [], x
        for layer in range(self.layers):
            zx, zh = masks[layer] if masks else (None, None)
            kids = [self._drop(c._s[layer], zh) for c in children]
            e, inp = g.exprs[layer], self._drop(inp, zx)
            if getattr(self, "ln_lstm", False):
                s = _ln_nary(self, e, inp, kids)
            else:
                s = _k.tree_node(
                    self._mode, inp, e["Wx"], e["U"], e["b"], kids, e.get("Uc"), self.forget_bias
                )
            states.append(s)
            if layer + 1 < self.layers:
                inp = _k.state_part(s, 0)  # the next layer's input
        return TreeState(self, tuple(states), children, g.version)


class NaryTreeLSTMBuilder(_LSTMTreeBase):
    """The N-ary Tree-LSTM (Tai et al. 2015; DyNet's C++ NaryTreeLSTMBuilder).

    Equations and options in the module docstring.

    Args:
        N: child positions with their own weights (2 for binary trees).
        layers, input_dim, hidden_dim, model: as DyNet's.
        forget_bias: added inside every forget gate (DyNet: 1).
        cell_terms: DyNet's extra Uc c_j terms in i, o and f.
        ln_lstm: layer normalisation (composed, slower; not with cell_terms).

    Example:
        >>> lstm = dy.NaryTreeLSTMBuilder(2, 1, 50, 128, m)
        >>> left, right = lstm.add_input(E[3]), lstm.add_input(E[7])
        >>> root = lstm.compose([left, right]); h = root.output()
    """

    _collection = "nary-tree-lstm-builder"

    def __init__(
        self, N, layers, input_dim, hidden_dim, model, forget_bias=1.0, cell_terms=False, ln_lstm=False
    ):
        self.N = as_dim(N, "N", 1)
        self.layers = as_dim(layers, "layers", 1)
        self.input_dim = as_dim(input_dim, "input_dim", 1)
        self.hidden_dim = H = as_dim(hidden_dim, "hidden_dim", 1)
        self.forget_bias, self.cell_terms, self.ln_lstm = float(forget_bias), bool(cell_terms), bool(ln_lstm)
        if self.cell_terms and self.ln_lstm:
            raise ValueError("NaryTreeLSTMBuilder: cell_terms and ln_lstm cannot be combined")
        self._mode, self._one_fused_node = 0, self.layers == 1 and not self.ln_lstm
        self._setup(model)
        self._names = ["Wx", "U", "b"] + (["Uc"] if self.cell_terms else [])
        self._params = []
        R, NH = (3 + self.N) * H, self.N * H
        for layer in range(self.layers):
            in_dim = self.input_dim if layer == 0 else H
            p = {
                "Wx": self.model.add_parameters(
                    (R, in_dim), init=glorot_blocks(R, in_dim, H, in_dim), name="Wx"
                ),
                "U": self.model.add_parameters((R, NH), init=glorot_blocks(R, NH, H, H), name="U"),
                "b": self.model.add_parameters(R, init=0.0, name="b"),
            }
            if self.cell_terms:
                p["Uc"] = self.model.add_parameters(
                    ((2 + self.N) * H, NH), init=glorot_blocks((2 + self.N) * H, NH, H, H), name="Uc"
                )
            if self.ln_lstm:  # after DyNet's parameters, in the builder's collection
                for k, n, v in (
                    ("gx", R, 1.0),
                    ("bx", R, 0.0),
                    ("gh", R, 1.0),
                    ("bh", R, 0.0),
                    ("gc", H, 1.0),
                    ("bc", H, 0.0),
                ):
                    p[k] = self.model.add_parameters(n, init=v, name=k)
            self._params.append(p)

    @property
    def spec(self):
        return (
            (self.N, self.layers, self.input_dim, self.hidden_dim),
            {"forget_bias": self.forget_bias, "cell_terms": self.cell_terms, "ln_lstm": self.ln_lstm},
        )


def _ln_nary(b, e, x, kids):
    """The N-ary cell with layer normalisation, from plain operations."""
    H, N = b.hidden_dim, b.N
    P = min(len(kids), N)
    R = (3 + P) * H

    def rows(v, n=R):
        return dy.pickrange(v, 0, n)

    parts = [rows(e["b"])]
    if x is not None:
        parts.append(dy.layer_norm(rows(e["Wx"] * x), rows(e["gx"]), rows(e["bx"])))
    if kids:
        sums = [[] for _ in range(N)]
        for j, k in enumerate(kids):
            sums[min(j, N - 1)].append(dy.pickrange(k, 0, H))
        hc = dy.concatenate([dy.esum(s) if s else dy.zeros((H,)) for s in sums])
        parts.append(dy.layer_norm(rows(e["U"] * hc), rows(e["gh"]), rows(e["bh"])))
    a = dy.esum(parts)
    i, o = dy.logistic(dy.pickrange(a, 0, H)), dy.logistic(dy.pickrange(a, H, 2 * H))
    c = dy.cmult(i, dy.tanh(dy.pickrange(a, 2 * H, 3 * H)))
    for j, k in enumerate(kids):
        m = 3 + min(j, N - 1)
        f = dy.logistic(dy.pickrange(a, m * H, (m + 1) * H) + b.forget_bias)
        c = c + dy.cmult(f, dy.pickrange(k, H, 2 * H))
    h = dy.cmult(o, dy.tanh(dy.layer_norm(c, e["gc"], e["bc"])))
    return dy.concatenate([h, c])


class ChildSumTreeLSTMBuilder(_LSTMTreeBase):
    """The child-sum Tree-LSTM (Tai et al. 2015, section 3.1): any number of unordered children.

    Equations and options in the module docstring.

    Args:
        layers, input_dim, hidden_dim, model: as DyNet's builders.
        forget_bias: added inside every forget gate.

    Example:
        >>> lstm = dy.ChildSumTreeLSTMBuilder(1, 50, 128, m)
        >>> head = lstm.compose([lstm.add_input(E[w]) for w in dependents], x=E[head_word])
    """

    _collection = "child-sum-tree-lstm-builder"

    def __init__(self, layers, input_dim, hidden_dim, model, forget_bias=1.0):
        self.layers = as_dim(layers, "layers", 1)
        self.input_dim = as_dim(input_dim, "input_dim", 1)
        self.hidden_dim = H = as_dim(hidden_dim, "hidden_dim", 1)
        self.forget_bias = float(forget_bias)
        self._mode, self._one_fused_node = 2, self.layers == 1
        self._setup(model)
        self._names = ["Wx", "U", "b"]
        self._params = []
        for layer in range(self.layers):
            in_dim = self.input_dim if layer == 0 else H
            self._params.append(
                {
                    "Wx": self.model.add_parameters(
                        (4 * H, in_dim), init=glorot_blocks(4 * H, in_dim, H, in_dim), name="Wx"
                    ),
                    "U": self.model.add_parameters((4 * H, H), init=glorot_blocks(4 * H, H, H, H), name="U"),
                    "b": self.model.add_parameters(4 * H, init=0.0, name="b"),
                }
            )

    @property
    def spec(self):
        return ((self.layers, self.input_dim, self.hidden_dim), {"forget_bias": self.forget_bias})


for _cls in (NaryTreeLSTMBuilder, ChildSumTreeLSTMBuilder):
    _io.register_savable(_cls)
