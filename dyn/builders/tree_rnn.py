"""The recursive tree RNN (DyNet paper, Figure 2) and DyNet's sequence-LSTM
tree builders (BidirectionalTreeLSTMBuilder, UnidirectionalTreeLSTMBuilder).

They are driven like the Tree-LSTMs of dyn/builders/tree.py: ``add_input(x)``
for a leaf, ``compose(children, x=None)`` for a parent (both return a
TreeState), ``encode(nested lists)``, or DyNet's ``add_input(id, children, x)``.

The tree RNN (TreeRNNBuilder)
=============================

Figure 2 of Neubig et al. (2017): a leaf is its input (a word embedding),
a parent ``h = tanh(W [h_left; h_right] + b)``. Generalised to N child
positions (child j uses the block ``e_j = min(j, N-1)`` of U, as the N-ary
Tree-LSTM) and an optional input at any node::

    leaf:    h = x                                 (input_dim None: Figure 2)
             h = tanh(b + Wx x)                    (with an input_dim)
    parent:  h = tanh(b + sum_j U[:, e_j] h_j (+ Wx x))

Each node is one fused ``dy.tree_rnn`` node. ``set_dropout(d)`` /
``set_dropouts(d, d_h)`` drop the inputs and the children's h with masks tied
over the graph, as the Tree-LSTMs do.

The sequence-LSTM tree builders (DyNet's C++ semantics)
=======================================================

``UnidirectionalTreeLSTMBuilder``: a node's embedding is the last output of a
standard LSTM (dy.VanillaLSTMBuilder) run from its initial state over
``[x, h_child_1, ..., h_child_n]``. ``BidirectionalTreeLSTMBuilder``: two
LSTMs of hidden_dim/2, one over ``[x, h_1 .. h_n]`` and one over
``[x, h_n .. h_1]``; the embedding is the concatenation of their last
outputs. Children's embeddings are fed to the same LSTM as x, so input_dim
must equal hidden_dim (as in DyNet). x may be left out at inner nodes. The
LSTM options (``ln_lstm``, ``forget_bias``) and dropout (``set_dropout`` ...)
are those of dy.VanillaLSTMBuilder.

Example:
    >>> rnn = dy.TreeRNNBuilder(2, 64, m)         # leaves are 64-dim embeddings
    >>> root = rnn.encode([E[1], [E[2], E[3]]])
    >>> bi = dy.BidirectionalTreeLSTMBuilder(1, 64, 64, m)
    >>> h = bi.compose([bi.add_input(E[1]), bi.add_input(E[2])], x=E[0]).output()
"""

from __future__ import annotations

import dyn as dy
from dyn import io as _io
from dyn._core.ops import treelstm as _k
from dyn.builders.tree import TreeBuilderBase, TreeState, as_dim, glorot_blocks

__all__ = ["TreeRNNBuilder", "UnidirectionalTreeLSTMBuilder", "BidirectionalTreeLSTMBuilder"]


class TreeRNNBuilder(TreeBuilderBase):
    """The recursive tree RNN of the DyNet paper's Figure 2 (see the module docstring).

    Args:
        N: child positions with their own block of U (2: binary trees).
        hidden_dim: size of every node's h.
        model: the ParameterCollection.
        input_dim: None: a leaf's h is its input (of size hidden_dim) and
            inner nodes take no input; an int: inputs (at leaves or any node)
            go through Wx.

    Parameters (get_parameters()[0]): [U {H, NH}, b {H}] and, with an
    input_dim, Wx {H, input_dim} last.

    Example:
        >>> rnn = dy.TreeRNNBuilder(2, 32, m)
        >>> h = rnn.compose([rnn.add_input(E[4]), rnn.add_input(E[9])]).output()
    """

    _collection = "tree-rnn-builder"

    def __init__(self, N, hidden_dim, model, input_dim=None):
        self.N = as_dim(N, "N", 1)
        self.hidden_dim = H = as_dim(hidden_dim, "hidden_dim", 1)
        self.input_dim = None if input_dim is None else as_dim(input_dim, "input_dim", 1)
        self._setup(model)
        self._names = ["U", "b"] + (["Wx"] if self.input_dim else [])
        self._params = {
            "U": self.model.add_parameters(
                (H, self.N * H), init=glorot_blocks(H, self.N * H, H, H), name="U"
            ),
            "b": self.model.add_parameters(H, init=0.0, name="b"),
        }
        if self.input_dim:
            self._params["Wx"] = self.model.add_parameters((H, self.input_dim), name="Wx")

    @property
    def _state_dim(self):
        return self.hidden_dim

    def get_parameters(self):
        return [[self._params[k] for k in self._names]]

    def _expr_lists(self):
        return [[self._cg.exprs[k] for k in self._names]]

    def _make_exprs(self, update):
        e = {k: p.expr(update) for k, p in self._params.items()}
        for k in ("U", "Wx"):
            if k in e:
                e[k] = _k.tree_weights(e[k])
        return e

    def _input_size(self, layer):
        return self.input_dim or self.hidden_dim  # without an input_dim the inputs are the leaves' h

    def _node(self, children, x, g):
        masks = self._masks(g, x, children)
        zx, zh = masks[0] if masks else (None, None)
        x = self._drop(x, zx)
        if self.input_dim is None:
            if x is not None and children:
                raise ValueError("TreeRNNBuilder: inner nodes take no input x without an input_dim")
            if not children:
                if x.dim()[0] not in ((self.hidden_dim,), (self.hidden_dim, 1)):
                    raise ValueError(
                        "TreeRNNBuilder: a leaf's input is its h: expected {%d}, got %s"
                        % (self.hidden_dim, x.dim()[0])
                    )
                return TreeState(self, (x,), children, g.version)
        e = g.exprs
        kids = [self._drop(c._s[0], zh) for c in children]
        return TreeState(self, (_k.tree_node(1, x, e.get("Wx"), e["U"], e["b"], kids),), children, g.version)

    @property
    def spec(self):
        return ((self.N, self.hidden_dim), {"input_dim": self.input_dim})


class UnidirectionalTreeLSTMBuilder(TreeBuilderBase):
    """DyNet's UnidirectionalTreeLSTMBuilder: an LSTM over [x, h_child_1, ..., h_child_n].

    Args:
        layers, input_dim, hidden_dim, model: as DyNet's (input_dim must equal hidden_dim).
        ln_lstm, forget_bias: passed to dy.VanillaLSTMBuilder.

    Example:
        >>> uni = dy.UnidirectionalTreeLSTMBuilder(1, 32, 32, m)
        >>> h = uni.compose([uni.add_input(E[1])], x=E[2]).output()
    """

    _collection = "unidirectional-tree-lstm-builder"
    _directions = 1

    def __init__(self, layers, input_dim, hidden_dim, model, ln_lstm=False, forget_bias=1.0):
        self.layers = as_dim(layers, "layers", 1)
        self.input_dim = as_dim(input_dim, "input_dim", 1)
        self.hidden_dim = as_dim(hidden_dim, "hidden_dim", 1)
        self.ln_lstm, self.forget_bias = bool(ln_lstm), float(forget_bias)
        name = type(self).__name__
        if self.hidden_dim % self._directions:
            raise ValueError("%s: hidden_dim must be even, got %d" % (name, self.hidden_dim))
        if self.input_dim != self.hidden_dim:
            raise ValueError(
                "%s: input_dim (%d) must equal hidden_dim (%d): x and the children's "
                "embeddings are inputs of the same LSTM" % (name, self.input_dim, self.hidden_dim)
            )
        self._setup(model)
        self.lstms = [
            dy.VanillaLSTMBuilder(
                self.layers,
                self.input_dim,
                self.hidden_dim // self._directions,
                self.model,
                ln_lstm=self.ln_lstm,
                forget_bias=self.forget_bias,
            )
            for _ in range(self._directions)
        ]

    @property
    def _state_dim(self):
        return self.hidden_dim

    def _make_exprs(self, update):
        for lstm in self.lstms:  # fixes update for this graph (DyNet caches it per graph)
            lstm.initial_state(update=update)
        return None

    def _node(self, children, x, g):
        first = [x] if x is not None else []
        hs = [c.output() for c in children]
        outs = []
        for d, lstm in enumerate(self.lstms):
            seq = first + (hs if d == 0 else hs[::-1])
            outs.append(lstm.initial_state().transduce(seq)[-1])
        return TreeState(self, (outs[0] if len(outs) == 1 else dy.concatenate(outs),), children, g.version)

    def get_parameters(self):
        """Per direction, the LSTM's get_parameters() (per layer [W_x, W_h, b])."""
        return [lstm.get_parameters() for lstm in self.lstms]

    def _expr_lists(self):
        return [lstm.get_parameter_expressions() for lstm in self.lstms]

    def set_dropout(self, d):
        for lstm in self.lstms:
            lstm.set_dropout(d)

    def set_dropouts(self, d, d_h):
        for lstm in self.lstms:
            lstm.set_dropouts(d, d_h)

    def disable_dropout(self):
        for lstm in self.lstms:
            lstm.disable_dropout()

    def set_dropout_masks(self, batch_size=1):
        self._graph()
        for lstm in self.lstms:
            lstm.set_dropout_masks(batch_size)

    def _masks(self, g, x, children):
        return None

    @property
    def spec(self):
        return (
            (self.layers, self.input_dim, self.hidden_dim),
            {"ln_lstm": self.ln_lstm, "forget_bias": self.forget_bias},
        )


class BidirectionalTreeLSTMBuilder(UnidirectionalTreeLSTMBuilder):
    """DyNet's BidirectionalTreeLSTMBuilder: concatenate([LSTM over [x, h_1..h_n], LSTM over [x, h_n..h_1]]).

    Args:
        layers, input_dim, hidden_dim, model: as DyNet's (hidden_dim even,
            input_dim == hidden_dim); each direction has hidden_dim/2.
        ln_lstm, forget_bias: passed to both dy.VanillaLSTMBuilder.

    Example:
        >>> bi = dy.BidirectionalTreeLSTMBuilder(1, 32, 32, m)
        >>> h = bi.compose([bi.add_input(E[1]), bi.add_input(E[2])]).output()
    """

    _collection = "bidirectional-tree-lstm-builder"
    _directions = 2


for _cls in (TreeRNNBuilder, UnidirectionalTreeLSTMBuilder, BidirectionalTreeLSTMBuilder):
    _io.register_savable(_cls)
