"""The machinery shared by every recurrent builder: RNNState, StackedRNNState
and the builder base class (per-graph parameter expressions, dropout masks,
initial states, the training-trick settings, spec for dy.save).

The public names are exported by dyn/builders/rnn.py; see its docstring for
the builders, the equations and the training tricks.
"""

from __future__ import annotations

import dyn as dy
from dyn import graph as _graph
from dyn._core.core.expr import all_alive
from dyn._core.core.graph import stamp as _cg_stamp
from dyn._core.core.graph import version as _cg_version
from dyn._core.ops import rnn as _k_rnn

# ---------------------------------------------------------------- helpers


def as_dim(v, what, minimum=0):
    """An integer size >= minimum. DyNet's builders accept integral floats
    (BiRNNBuilder passes hidden_dim/2)."""
    if isinstance(v, bool):
        raise TypeError("%s must be an integer, got %r" % (what, v))
    try:
        i = int(v)
    except (TypeError, ValueError):
        raise TypeError("%s must be an integer, got %r" % (what, v)) from None
    if i != v or i < minimum:
        raise ValueError("%s must be an integer >= %d, got %r" % (what, minimum, v))
    return i


def keep_mask(n, rate, batch_size):
    """A dropout mask {n} x batch_size: 1/(1-rate) with probability 1-rate, else 0."""
    return dy.random_bernoulli((n,), 1.0 - rate, 1.0 / (1.0 - rate), batch_size)


def check_rate(p, what="dropout rate"):
    p = float(p)
    if not 0.0 <= p < 1.0:
        raise ValueError("%s must be in [0, 1), got %r" % (what, p))
    return p


def column(P, t, T):
    """Column t of the {n, T} projections P (P itself when T == 1)."""
    return P if T == 1 else dy.pick(P, t, 1)


def batch_of(x):
    return x.dim()[1]


class LayerState:
    """One layer's state at one step: h, c (LSTMs) and the stacked [h; c]
    node of the public fused step; missing ones are derived on demand. On the
    builders' fused LSTM path (``fused``) h is an h-valued lstm_step node that
    keeps c_t in its scratch: the next step reads it there, and c is made
    (lstm_state_c) only when asked for.

    A part derived on demand is made again when cg_revert() dropped it (the
    state itself, made before the checkpoint, is still valid): ``lazy`` says
    which parts were derived here (1: c, 2: packed)."""

    __slots__ = ("h", "c", "packed", "H", "fused", "lazy")

    def __init__(self, h=None, c=None, packed=None, H=0, fused=False):
        self.h, self.c, self.packed, self.H, self.fused, self.lazy = h, c, packed, H, fused, 0

    def get_c(self):
        c = self.c
        if c is None or (self.lazy & 1 and not c.is_alive()):
            if self.fused:
                c = _k_rnn.lstm_state_c(self.h)
            elif self.packed is not None:
                c = _k_rnn.lstm_step_part(self.get_packed(), 1, "lstm_step_c")
            else:
                return None
            self.c = c
            self.lazy |= 1
        return c

    def get_packed(self):
        p = self.packed
        if p is None or (self.lazy & 2 and not p.is_alive()):
            p = self.packed = dy.concatenate([self.h, self.get_c()])
            self.lazy |= 2
        return p

    def step_prev(self):
        """What a fused LSTM step takes as its previous state: the h-valued node itself, or [h; c]."""
        return self.h if self.fused else self.get_packed()


class LayerRun:
    """One layer's run over a sequence on the fused LSTM path: its h nodes
    (h-valued lstm_step nodes). Indexing or iterating gives LayerState
    objects, made on first use: transduce only needs the h list, so it makes
    none."""

    __slots__ = ("hs", "H", "_states")

    def __init__(self, hs, H):
        self.hs, self.H, self._states = hs, H, None

    def states(self):
        if self._states is None:
            H = self.H
            self._states = [LayerState(h, None, None, H, True) for h in self.hs]
        return self._states

    def __getitem__(self, t):
        return self.states()[t]

    def __iter__(self):
        return iter(self.states())

    def __len__(self):
        return len(self.hs)


def layer_hs(states):
    """The h nodes of one layer's run (a LayerRun or a list of LayerState)."""
    return states.hs if states.__class__ is LayerRun else [ls.h for ls in states]


# ---------------------------------------------------------------- states


class RNNState:
    """An immutable point in a sequence: DyNet's RNNState.

    ``add_input`` returns a new state whose ``prev()`` is this one, so one
    state can be extended in several ways (beam search, trees).

    Example:
        >>> s0 = lstm.initial_state()
        >>> s2 = s0.add_input(x1).add_input(x2)
        >>> y = s2.output(); assert s2.prev().prev() is s0
    """

    __slots__ = ("_builder", "_layers", "_prev", "_out", "_ver")

    def __init__(self, builder, layers, prev=None, out=None, ver=None):
        self._builder, self._layers, self._prev, self._out = builder, layers, prev, out
        self._ver = _graph.cg_version() if ver is None else ver

    def add_input(self, x):
        """The state after one more input x (an Expression, batched or not)."""
        return self._builder._advance1(self, x)

    def add_inputs(self, xs):
        """The list of successive states after each input of xs."""
        return self._builder._advance(self, list(xs), True)

    def transduce(self, xs):
        """The outputs after each input of xs (no intermediate states: cheaper)."""
        return self._builder._advance(self, list(xs), False)

    def output(self):
        """The top layer's h (the sum over layers with sum_outputs); None initially."""
        return self._out

    def h(self):
        """Per-layer h (empty for an initial state without given values)."""
        return tuple(ls.h for ls in self._layers) if self._layers else ()

    def s(self):
        """The full state: LSTMs (c_1..c_L, h_1..h_L); others as h()."""
        if not self._layers:
            return ()
        if self._builder._has_cell:
            return tuple(ls.get_c() for ls in self._layers) + self.h()
        return self.h()

    def prev(self):
        return self._prev

    def b(self):
        return self._builder

    def set_h(self, es):
        """A new state (following this one) with the given per-layer h."""
        return self._builder._set(self, list(es), only_h=True)

    def set_s(self, es):
        """A new state with the given full state (LSTMs: [c...] or [c..., h...])."""
        return self._builder._set(self, list(es), only_h=False)


class StackedRNNState:
    """States of several builders used as one stack: the output of each is
    the input of the next (DyNet's StackedRNNState)."""

    def __init__(self, states, prev=None):
        self.states = list(states)
        self._prev = prev

    def add_input(self, x):
        new = []
        for s in self.states:
            s = s.add_input(x)
            x = s.output()
            new.append(s)
        return StackedRNNState(new, self)

    def add_inputs(self, xs):
        out, s = [], self
        for x in xs:
            s = s.add_input(x)
            out.append(s)
        return out

    def transduce(self, xs):
        return [s.output() for s in self.add_inputs(xs)]

    def output(self):
        return self.states[-1].output()

    def prev(self):
        return self._prev

    def h(self):
        return [s.h() for s in self.states]

    def s(self):
        return [s.s() for s in self.states]


# ---------------------------------------------------------------- builder base


class RNNBuilderBase:
    """What every recurrent builder shares. Subclasses define ``_collection``
    (the DyNet sub-collection name), ``_layer_params(layer, in_dim)`` (DyNet's
    parameter list of one layer), ``_extra_params(layer, in_dim)`` and
    ``_run_layer(layer, X, xs, prev)`` (one layer over a whole input list)."""

    _has_cell = False
    _collection = "rnn-builder"
    _rates_of_set_dropout = ("x", "h")

    def __init__(
        self, layers, input_dim, hidden_dim, model, *, layer_norm=False, learned_init=False, sum_outputs=False
    ):
        self.layers = as_dim(layers, "layers")
        self.input_dim = as_dim(input_dim, "input_dim")
        self.hidden_dim = as_dim(hidden_dim, "hidden_dim")
        self.layer_norm, self.learned_init, self.sum_outputs = (
            bool(layer_norm),
            bool(learned_init),
            bool(sum_outputs),
        )
        self.model = model.add_subcollection(self._collection)
        self._params, self._extra = [], []
        for layer in range(self.layers):
            in_dim = self.input_dim if layer == 0 else self.hidden_dim
            self._params.append(self._layer_params(layer, in_dim))
        # layer-norm gains/biases and learned initial states come after DyNet's
        # parameters, in the builder's own collection (so dy.save keeps them)
        for layer in range(self.layers):
            in_dim = self.input_dim if layer == 0 else self.hidden_dim
            extra = self._extra_params(layer, in_dim) if self.layer_norm else {}
            if self.learned_init:
                H = self.hidden_dim
                extra["h0"] = self.model.add_parameters(H, init=0.0, name="h0")
                if self._has_cell:
                    extra["c0"] = self.model.add_parameters(H, init=0.0, name="c0")
            self._extra.append(extra)
        self.rates = dict.fromkeys("xhcgw", 0.0)
        self.zoneout = (0.0, 0.0)
        self._zoneout_train = True
        self._cg = None

    # -------- parameters
    def _add(self, dim, bias=False, name=""):
        return self.model.add_parameters(dim, init=0.0 if bias else None, name=name)

    def param_collection(self):
        return self.model

    def get_parameters(self):
        """Per layer, DyNet's list of Parameters."""
        return [list(ps) for ps in self._params]

    def get_parameter_expressions(self):
        """Per layer, the parameters' expressions of the current graph."""
        cg = self._live_cg()
        if cg is None:
            raise ValueError(
                "get_parameter_expressions: call initial_state() first in this computation graph"
            )
        return [list(es) for es in cg[1]]

    def whoami(self):
        return type(self).__name__

    # -------- graph
    def initial_state(self, vecs=None, update=True):
        """The start of a sequence (cached per graph, as DyNet).

        Args:
            vecs: optional initial state (as set_s takes it).
            update: False uses the parameters as constants (honoured on the
                first call in a graph only, as DyNet).
        """
        if self._live_cg() is None:
            self._new_graph(bool(update))
        init = self._cg[2]
        return init if vecs is None else init.set_s(vecs)

    def initial_state_from_raw_vectors(self, vecs, update=True):
        return self.initial_state([dy.inputTensor(v) for v in vecs], update)

    def _new_graph(self, update):
        exprs = [[p.expr(update) for p in ps] for ps in self._params]
        extras = [{k: p.expr(update) for k, p in e.items()} for e in self._extra]
        # (version, expressions, initial state, extra expressions, per-layer derived, masks,
        #  the graph's stamp when the cache was last known to be whole: see _live_cg)
        self._cg = [_graph.cg_version(), exprs, None, extras, [None] * self.layers, None, _cg_stamp()]
        layers = None
        if self.learned_init:
            layers = [LayerState(e["h0"], e.get("c0"), H=self.hidden_dim) for e in extras]
        self._cg[2] = RNNState(self, layers)

    def _live_cg(self):
        """This graph's cache, or None when there is none in this graph. After a
        cg_revert() that dropped its parameter expressions it is gone too; parts
        made later (derived weights, dropout masks) that were dropped are made
        again on demand."""
        cg = self._cg
        if cg is None or cg[6] == _cg_stamp():
            return cg
        if cg[0] != _cg_version() or not (all_alive(cg[1]) and all_alive(cg[3])):
            return None
        derived = cg[4]
        for layer, d in enumerate(derived):
            if not all_alive(d):
                derived[layer] = None
        if not all_alive(cg[5]):
            cg[5] = None
        cg[6] = _cg_stamp()
        return cg

    def _graph_state(self, state=None):
        cg = self._live_cg()
        if cg is None or (state is not None and state._ver != cg[0]):
            if state is not None and state._ver == _cg_version():
                raise ValueError(
                    "%s: the state was dropped by cg_revert() (it was made after the reverted "
                    "cg_checkpoint())" % type(self).__name__
                )
            raise ValueError(
                "%s: the state belongs to an earlier computation graph; call initial_state() "
                "in this one" % type(self).__name__
            )
        return cg

    def _derived(self, layer):
        """Per-graph expressions derived from a layer's parameters (built once)."""
        d = self._cg[4]
        if d[layer] is None:
            d[layer] = self._derive(layer, self._cg[1][layer], self._cg[3][layer])
        return d[layer]

    def _derive(self, layer, exprs, extra):
        return {}

    # -------- dropout and the other training tricks
    def set_dropout(self, d):
        """DyNet's set_dropout: variational (tied-mask) dropout on each layer's
        input and recurrent state; see the module docstring."""
        d = check_rate(d)
        for k in self._rates_of_set_dropout:
            self.rates[k] = d

    def set_dropouts(self, d, d_h):
        """Separate rates for the layer inputs (d) and the recurrent state (d_h)."""
        self.rates["x"], self.rates["h"] = check_rate(d), check_rate(d_h)

    def set_recurrent_dropout(self, p):
        """Semeniuta et al.: dropout on the cell update (LSTM g, GRU candidate)."""
        self.rates["g"] = check_rate(p)

    def set_weight_dropout(self, p):
        """DropConnect on the recurrent weight matrices (one mask per graph)."""
        self.rates["w"] = check_rate(p)

    def set_zoneout(self, z_h, z_c=None):
        """Zoneout (Krueger et al.): each unit keeps its previous value with
        probability z_h (h) / z_c (LSTM cells; default z_h)."""
        self.zoneout = (check_rate(z_h, "zoneout"), check_rate(z_h if z_c is None else z_c, "zoneout"))
        self._zoneout_train = True

    def disable_dropout(self):
        """Evaluation mode: no dropout; zoneout uses its expectation."""
        for k in self.rates:
            self.rates[k] = 0.0
        self._zoneout_train = False

    def set_dropout_masks(self, batch_size=1):
        """Sample this graph's dropout masks now, for batch_size (else at the first input)."""
        self._graph_state()
        self._cg[5] = self._make_masks(as_dim(batch_size, "batch_size"))

    def _masks(self, bd):
        if self._cg[5] is None:
            self._cg[5] = self._make_masks(bd)
        return self._cg[5]

    def _make_masks(self, bd):
        """Per layer: x, h, c, g masks (None when the rate is 0) and the recurrent weights."""
        r, H, out = self.rates, self.hidden_dim, []
        for layer in range(self.layers):
            in_dim = self.input_dim if layer == 0 else H
            m = {
                k: (keep_mask(n, r[k], bd) if r[k] > 0 else None)
                for k, n in (("x", in_dim), ("h", H), ("c", H), ("g", H))
            }
            m["W"] = None
            if r["w"] > 0:  # DropConnect: one mask on the recurrent matrices, shared by the batch
                m["W"] = {k: dy.dropout(w, r["w"]) for k, w in self._recurrent(layer).items()}
            out.append(m)
        return out

    def _recurrent(self, layer):
        """The recurrent matrices DropConnect applies to: name -> expression."""
        return {}

    def _zone(self, prev, new, rates):
        """Zoneout: each unit keeps prev (None = zeros) with probability rate.
        rates: one rate, or (z_h, z_c) for a stacked [h; c] state."""
        rates = rates if isinstance(rates, tuple) else (rates,)
        if max(rates) <= 0:
            return new
        n = new.dim()[0][0] // len(rates)
        if self._zoneout_train:
            parts = (
                [dy.random_bernoulli((n * len(rates),), rates[0], 1.0, batch_of(new))]
                if len(set(rates)) == 1
                else [dy.random_bernoulli((n,), z, 1.0, batch_of(new)) for z in rates]
            )
            m = parts[0] if len(parts) == 1 else dy.concatenate(parts)
        else:  # test time: the expectation (Krueger et al.)
            m = dy.inputVector([z for z in rates for _ in range(n)])
        return new - dy.cmult(m, new) if prev is None else new + dy.cmult(m, prev - new)

    # -------- running
    def _advance(self, state, xs, keep_states):
        """Run xs from state through every layer; states or outputs."""
        cg = self._graph_state(state)
        if state._builder is not self:
            raise ValueError("the state belongs to another builder")
        if not xs:
            return []
        masks = cg[5] if cg[5] is not None else self._masks(batch_of(xs[0]))
        T, inputs, per_layer = len(xs), xs, []
        for layer in range(self.layers):
            prev = state._layers[layer] if state._layers else None
            states = self._run_layer(layer, inputs, prev, masks[layer])
            per_layer.append(states)
            inputs = layer_hs(states)
        outs = self._outputs(per_layer, T)
        if not keep_states:
            return outs
        result, cur = [], state
        for t in range(T):
            cur = RNNState(self, [per_layer[layer][t] for layer in range(self.layers)], cur, outs[t], cg[0])
            result.append(cur)
        return result

    def _advance1(self, state, x):
        """add_input: _advance for one input, without the per-sequence lists (a decoder's step)."""
        cg = self._graph_state(state)
        if state._builder is not self:
            raise ValueError("the state belongs to another builder")
        masks = cg[5] if cg[5] is not None else self._masks(batch_of(x))
        prev, layers, inp = state._layers, [], x
        for layer in range(self.layers):
            ls = self._step1(layer, inp, prev[layer] if prev else None, masks[layer])
            layers.append(ls)
            inp = ls.h
        return RNNState(self, layers, state, self._outputs([[ls] for ls in layers], 1)[0], cg[0])

    def _step1(self, layer, x, prev, m):
        """One layer's LayerState after one input (builders may specialise it)."""
        return self._run_layer(layer, [x], prev, m)[0]

    def _outputs(self, per_layer, T):
        if self.sum_outputs and self.layers > 1:
            return [dy.esum([states[t].h for states in per_layer]) for t in range(T)]
        return layer_hs(per_layer[-1]) if per_layer else [None] * T

    def _set(self, state, es, only_h):
        self._graph_state(state)
        L, H = self.layers, self.hidden_dim
        if self._has_cell and not only_h:
            if len(es) not in (L, 2 * L):
                raise ValueError(
                    "set_s: expected %d (c) or %d (c and h) expressions, got %d" % (L, 2 * L, len(es))
                )
            hs = es[L:] if len(es) == 2 * L else [dy.zeros(H) for _ in range(L)]
            layers = [LayerState(h, c, H=H) for c, h in zip(es[:L], hs)]
        else:
            if len(es) != L:
                raise ValueError(
                    "set_%s: expected %d expressions, got %d" % ("h" if only_h else "s", L, len(es))
                )
            layers = []
            for layer, h in enumerate(es):
                c = None
                if self._has_cell:
                    c = state._layers[layer].get_c() if state._layers else dy.zeros(H)
                layers.append(LayerState(h, c, H=H))
        out = self._outputs([[ls] for ls in layers], 1)[0] if layers else None
        return RNNState(self, layers, state, out)

    # -------- saving
    def _options(self):
        return {
            "layer_norm": self.layer_norm,
            "learned_init": self.learned_init,
            "sum_outputs": self.sum_outputs,
        }

    @property
    def spec(self):
        return (self.layers, self.input_dim, self.hidden_dim, self._options())

    @classmethod
    def from_spec(cls, spec, model):
        layers, input_dim, hidden_dim, *rest = spec
        opts = rest[-1] if rest and isinstance(rest[-1], dict) else {}
        return cls(layers, input_dim, hidden_dim, model, **opts)
