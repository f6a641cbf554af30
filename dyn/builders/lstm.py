"""LSTM builders with DyNet's API: VanillaLSTMBuilder (the standard LSTM),
CompactVanillaLSTMBuilder, SparseLSTMBuilder, and (lstm_coupled.py)
CoupledLSTMBuilder, FastLSTMBuilder, LSTMBuilder; BiRNNBuilder is in birnn.py.

dyn's unorthodox choice: ``LSTMBuilder`` is the coupled-gate LSTM
====================================================================

In dyn, ``dy.LSTMBuilder`` is ``dy.CoupledLSTMBuilder``: one input gate i
and the forget gate tied to it, f = 1 - i (with peepholes, DyNet's
CoupledLSTMBuilder equations). DyNet 2.x made ``LSTMBuilder`` an alias of
``VanillaLSTMBuilder``; dyn deliberately does not: the name keeps
the meaning it had in DyNet 1.x and in its papers, a coupled gate needs a
third fewer gate parameters, and it trains as well on most tasks (Greff et
al., "LSTM: A Search Space Odyssey", 2017, found coupling the gates harmless).
``LSTMBuilder`` accepts VanillaLSTMBuilder's keyword arguments (``ln_lstm``,
``forget_bias``), so DyNet programs run unchanged; but models saved by
DyNet's ``LSTMBuilder`` hold VanillaLSTM parameters: load those with
``dy.VanillaLSTMBuilder``, and use it wherever you want the standard LSTM.

The standard LSTM (VanillaLSTMBuilder, per layer, gate rows [i; f; o; g])
==========================================================================

    a = b + W_x x_t + W_h h_{t-1}                  (first step: b + W_x x_t)
    i = sig(a_i), f = sig(a_f + forget_bias), o = sig(a_o), g = tanh(a_g)
    c_t = f * c_{t-1} + i * g,   h_t = o * tanh(c_t)

Fast path: a whole input list is projected in one matrix-matrix product
``b + W_x [x_1 .. x_T]`` and each step is one fused lstm_step node (gates,
cell and output) whose value is h_t, the layer's output; c_t stays in the
node's scratch for the next step (dyn/_core/cpu/rnn.pyx), and ``s()``/``c()`` copy
it out only when asked for. With zoneout the steps are the public
``dy.lstm_step`` (value [h; c]) and ``dy.lstm_step_h``. Layer norm
(``ln_lstm=True``) runs composed from plain operations. The training tricks
(dropout variants, zoneout, DropConnect, learned initial state, stacked sum)
are described in dyn/builders/rnn.py.

Example:
    >>> m = dy.ParameterCollection()
    >>> lstm = dy.VanillaLSTMBuilder(2, 50, 50, m)
    >>> lstm.set_dropouts(0.2, 0.1)
    >>> outs = lstm.initial_state().transduce(embeddings)
"""

from __future__ import annotations

import numpy as np

import dyn as dy
from dyn import io as _io
from dyn._core.ops import rnn as _k_rnn
from dyn.builders._rnn_base import LayerRun, LayerState, RNNBuilderBase, batch_of, column

__all__ = ["VanillaLSTMBuilder", "CompactVanillaLSTMBuilder", "SparseLSTMBuilder"]


def _stack(xs):
    return xs[0] if len(xs) == 1 else dy.concatenate_cols(xs)


class VanillaLSTMBuilder(RNNBuilderBase):
    """The standard LSTM (equations in the module docstring).

    Args:
        layers, input_dim, hidden_dim, model: DyNet's.
        ln_lstm: layer normalisation (DyNet's): a = b + LN(W_x x; g_x, b_x) +
            LN(W_h h; g_h, b_h), h = o * tanh(LN(c; g_c, b_c)).
        forget_bias: added to the forget gate's pre-activation at every step.
        learned_init, sum_outputs: see dyn/builders/rnn.py.

    Parameters per layer (get_parameters): [W_x (4H x in), W_h (4H x H),
    b (4H)]; the layer-norm parameters follow in the builder's collection
    (DyNet put them in the parent collection, where dy.save missed them).

    Example:
        >>> lstm = dy.VanillaLSTMBuilder(1, 4, 8, m, forget_bias=1.0)
        >>> s = lstm.initial_state().add_input(x); h, c = s.h()[0], s.s()[0]
    """

    _has_cell = True
    _collection = "vanilla-lstm-builder"

    def __init__(self, layers, input_dim, hidden_dim, model, ln_lstm=False, forget_bias=1.0, **options):
        self.forget_bias = float(forget_bias)
        options["layer_norm"] = bool(ln_lstm or options.get("layer_norm", False))
        super().__init__(layers, input_dim, hidden_dim, model, **options)

    def _layer_params(self, layer, in_dim):
        H = self.hidden_dim
        return [self._add((4 * H, in_dim)), self._add((4 * H, H)), self._add(4 * H, bias=True)]

    def _extra_params(self, layer, in_dim):
        H, e = self.hidden_dim, {}
        for k, n in (("h", 4 * H), ("x", 4 * H), ("c", H)):  # DyNet's order
            e["g" + k] = self.model.add_parameters(n, init=1.0, name="ln")
            e["b" + k] = self.model.add_parameters(n, init=0.0, name="ln")
        return e

    def _weights(self, layer):
        return self._cg[1][layer][:3]

    def _recurrent(self, layer):
        return {"Wh": self._weights(layer)[1]}

    def _step_weight(self, layer, Wh, m):
        """The fused path's recurrent matrix (per graph): see dy.lstm_step_weight."""
        if m["W"]:
            d = m["W"]
            if "Wh_step" not in d:
                d["Wh_step"] = _k_rnn.lstm_step_weight(Wh)
            return d["Wh_step"]
        d = self._derived(layer)
        if "Wh_step" not in d:
            d["Wh_step"] = _k_rnn.lstm_step_weight(Wh)
        return d["Wh_step"]

    def _layer_inputs(self, layer, X, m):
        """A layer's Wx, Wh (DropConnect's when set), b, and its input X times the x mask."""
        Wx, Wh, b = self._weights(layer)
        if m["W"]:
            Wh = m["W"]["Wh"]
        if m["x"] is not None:
            X = dy.cmult(X, m["x"])
        return Wx, Wh, b, X

    def _advance(self, state, xs, keep_states):
        # transduce over one layer on the fused path, with no dropout mask: the nodes _run_layer
        # makes (the stacked inputs, their projection, the recurrent matrix once per graph, the
        # steps), without its per-layer lists and states (a character tagger transduces every
        # rare word's characters: about 0.9 us of Python a call less)
        if keep_states or self.layers != 1 or self.layer_norm or max(self.zoneout) > 0 \
                or type(self)._run_layer is not VanillaLSTMBuilder._run_layer:
            return super()._advance(state, xs, keep_states)
        cg = self._graph_state(state)
        if state._builder is not self:
            raise ValueError("the state belongs to another builder")
        if not xs:
            return []
        masks = cg[5] if cg[5] is not None else self._masks(batch_of(xs[0]))
        m = masks[0]
        if m["W"] or m["x"] is not None or m["h"] is not None or m["g"] is not None:
            return super()._advance(state, xs, keep_states)
        X = _stack(xs)                  # (before the weights, as _run_layer: the same node order)
        Wx, Wh, b = self._weights(0)
        P = dy.affine_transform([b, Wx, X])
        Wh = self._step_weight(0, Wh, m)
        s = state._layers[0].step_prev() if state._layers else None
        return _k_rnn.lstm_sequence(P, s, Wh, None, None, len(xs), self.forget_bias)

    def _run_layer(self, layer, xs, prev, m):
        Wx, Wh, b, X = self._layer_inputs(layer, _stack(xs), m)
        if self.layer_norm:
            return self._run_ln(layer, Wx * X, len(xs), Wh, b, prev, m)
        P, T, H = dy.affine_transform([b, Wx, X]), len(xs), self.hidden_dim
        Wh = self._step_weight(layer, Wh, m)
        fb, zone, mh, mg = self.forget_bias, self.zoneout, m["h"], m["g"]
        if max(zone) <= 0:  # the node-creating loop runs in C
            s = prev.step_prev() if prev is not None else None
            return LayerRun(_k_rnn.lstm_sequence(P, s, Wh, mh, mg, T, fb), H)
        s, out = (prev.get_packed() if prev is not None else None), []
        for t in range(T):
            if s is None:
                sn = _k_rnn.lstm_step(P, None, None, None, mg, t, fb, "lstm_step")
            else:
                sn = _k_rnn.lstm_step(P, s, Wh, mh, mg, t, fb, "lstm_step")
            s = self._zone(s, sn, zone)
            out.append(LayerState(_k_rnn.lstm_step_part(s, 0, "lstm_step_h"), None, s, H))
        return out

    def _step1(self, layer, x, prev, m):
        # add_input's step: _run_layer's fused nodes for one input, without its sequence lists
        if self.layer_norm or max(self.zoneout) > 0:
            return super()._step1(layer, x, prev, m)
        Wx, Wh, b, x = self._layer_inputs(layer, x, m)
        P, Wh = dy.affine_transform([b, Wx, x]), self._step_weight(layer, Wh, m)
        s = prev.step_prev() if prev is not None else None
        hs = _k_rnn.lstm_sequence(P, s, Wh, m["h"], m["g"], 1, self.forget_bias)
        return LayerState(hs[0], None, None, self.hidden_dim, True)

    def _fb_vector(self, layer):
        d = self._derived(layer)
        if "fb" not in d:
            H = self.hidden_dim
            d["fb"] = dy.inputVector([0.0] * H + [self.forget_bias] * H + [0.0] * H)
        return d["fb"]

    def _run_ln(self, layer, WX, T, Wh, b, prev, m):
        """The layer-normalised LSTM, composed from plain operations."""
        H, e, out = self.hidden_dim, self._cg[3][layer], []
        h, c = (prev.h, prev.get_c()) if prev is not None else (None, None)
        for t in range(T):
            a = b + dy.layer_norm(column(WX, t, T), e["gx"], e["bx"])
            if h is not None:
                hm = h if m["h"] is None else dy.cmult(h, m["h"])
                a = a + dy.layer_norm(Wh * hm, e["gh"], e["bh"])
            ifo = dy.logistic(dy.pick_range(a, 0, 3 * H) + self._fb_vector(layer))
            g = dy.tanh(dy.pick_range(a, 3 * H, 4 * H))
            if m["g"] is not None:
                g = dy.cmult(g, m["g"])
            cn = dy.cmult(dy.pick_range(ifo, 0, H), g)
            if c is not None:
                cn = cn + dy.cmult(dy.pick_range(ifo, H, 2 * H), c)
            hn = dy.cmult(dy.pick_range(ifo, 2 * H, 3 * H), dy.tanh(dy.layer_norm(cn, e["gc"], e["bc"])))
            h, c = self._zone(h, hn, self.zoneout[0]), self._zone(c, cn, self.zoneout[1])
            out.append(LayerState(h, c, H=H))
        return out

    def _options(self):
        opts = super()._options()
        opts["forget_bias"] = self.forget_bias
        return opts


class CompactVanillaLSTMBuilder(VanillaLSTMBuilder):
    """DyNet's CompactVanillaLSTMBuilder: the standard LSTM with a forget bias
    of 1, no layer norm, and ``set_weightnoise(std)``: fresh N(0, std^2)
    noise on W_x, W_h and b at every step (through the fused
    ``vanilla_lstm_gates`` node; DyNet's C++ had a bug that skipped the
    products). When: a cheap regulariser for small data (Graves 2011).

    Example:
        >>> lstm = dy.CompactVanillaLSTMBuilder(1, 4, 8, m)
        >>> lstm.set_weightnoise(0.01)
    """

    _collection = "compact-vanilla-lstm-builder"

    def __init__(self, layers, input_dim, hidden_dim, model, **options):
        options.pop("forget_bias", None)
        if options.pop("ln_lstm", False) or options.pop("layer_norm", False):
            raise ValueError(
                "CompactVanillaLSTMBuilder has no layer norm (use VanillaLSTMBuilder(ln_lstm=True))"
            )
        self.weightnoise = 0.0
        super().__init__(layers, input_dim, hidden_dim, model, forget_bias=1.0, **options)

    def set_weightnoise(self, std):
        std = float(std)
        if std < 0:
            raise ValueError("set_weightnoise: std must be >= 0, got %r" % std)
        self.weightnoise = std

    def _step1(self, layer, x, prev, m):
        if self.weightnoise <= 0:
            return super()._step1(layer, x, prev, m)
        return self._run_layer(layer, [x], prev, m)[0]

    def _run_layer(self, layer, xs, prev, m):
        if self.weightnoise <= 0:
            return super()._run_layer(layer, xs, prev, m)
        Wx, Wh, b = self._weights(layer)
        if m["W"]:
            Wh = m["W"]["Wh"]
        H, out = self.hidden_dim, []
        h, c = (prev.h, prev.get_c()) if prev is not None else (None, None)
        for x in xs:
            if m["x"] is not None:
                x = dy.cmult(x, m["x"])
            hp = dy.zeros(H) if h is None else (h if m["h"] is None else dy.cmult(h, m["h"]))
            gates = dy.vanilla_lstm_gates(x, hp, Wx, Wh, b, self.weightnoise)
            if c is None:
                c = dy.zeros(H, batch_size=gates.dim()[1])
            cn = dy.vanilla_lstm_c(c, gates)
            hn = dy.vanilla_lstm_h(cn, gates)
            h, c = self._zone(h, hn, self.zoneout[0]), self._zone(c, cn, self.zoneout[1])
            out.append(LayerState(h, c, H=H))
        return out

    def _options(self):
        opts = super()._options()
        del opts["forget_bias"], opts["layer_norm"]
        return opts


class SparseLSTMBuilder(VanillaLSTMBuilder):
    """DyNet's (experimental) SparseLSTMBuilder: the standard LSTM with
    W_x * M_x and W_h * M_h, M constant masks (parameters of ones, never
    trained); ``set_sparsity(f)`` zeroes the mask entries of the fraction f
    of smallest-magnitude weights over both matrices of every layer.
    When: pruning a trained LSTM, then fine-tuning the rest.

    Parameters per layer: [W_x, W_h, b, mask_x, mask_h].

    Example:
        >>> lstm = dy.SparseLSTMBuilder(1, 4, 8, m)
        >>> lstm.set_sparsity(0.5)
    """

    _collection = "vanilla-lstm-builder"

    def _layer_params(self, layer, in_dim):
        ps = super()._layer_params(layer, in_dim)
        H = self.hidden_dim
        masks = [self.model.add_parameters(dim, init=1.0) for dim in ((4 * H, in_dim), (4 * H, H))]
        for mask in masks:  # ones where the weight is kept; never trained
            mask.set_updated(False)
        return ps + masks

    def _derive(self, layer, exprs, extra):
        Mx, Mh = (p.expr(False) for p in self._params[layer][3:])
        return {"Wx": dy.cmult(exprs[0], Mx), "Wh": dy.cmult(exprs[1], Mh)}

    def _weights(self, layer):
        d = self._derived(layer)
        return d["Wx"], d["Wh"], self._cg[1][layer][2]

    def set_sparsity(self, fraction):
        f = float(fraction)
        if not 0.0 <= f <= 1.0:
            raise ValueError("set_sparsity: fraction must be in [0, 1], got %r" % f)
        ws = [p for ps in self._params for p in ps[:2]]
        mags = np.concatenate([np.abs(p.as_array()).ravel() for p in ws]) if ws else np.zeros(0)
        k = int(f * mags.size)
        cut = np.sort(mags)[k - 1] if k > 0 else -1.0
        for ps in self._params:
            for w, mask in zip(ps[:2], ps[3:]):
                mask.set_value((np.abs(w.as_array()) > cut).astype(np.float64))


for _cls in (VanillaLSTMBuilder, CompactVanillaLSTMBuilder, SparseLSTMBuilder):
    _io.register_savable(_cls)
