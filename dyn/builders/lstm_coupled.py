"""The coupled-gate LSTMs: CoupledLSTMBuilder (= dyn's ``LSTMBuilder``, see
dyn/builders/lstm.py's docstring for why) and FastLSTMBuilder.

Per layer (DyNet's CoupledLSTMBuilder, with peepholes):

    i = sig(b_i + W_xi x + W_hi h_{t-1} + W_ci c_{t-1} - forget_bias)
    f = 1 - i
    g = tanh(b_c + W_xc x + W_hc h_{t-1})
    c_t = f * c_{t-1} + i * g                       (first step: i * g)
    o = sig(b_o + W_xo x + W_ho h_{t-1} + W_co c_t)  (peephole on the new cell)
    h_t = o * tanh(c_t)

FastLSTMBuilder drops the peephole terms. The three input matrices are used
stacked [W_xi; W_xo; W_xc] (one product for the whole sequence) and the three
recurrent ones likewise (one product per step).
"""

from __future__ import annotations

import dyn as dy
from dyn import io as _io
from dyn.builders._rnn_base import LayerState, RNNBuilderBase, column

__all__ = ["CoupledLSTMBuilder", "LSTMBuilder", "FastLSTMBuilder"]


class CoupledLSTMBuilder(RNNBuilderBase):
    """Coupled input/forget gate LSTM with peepholes (equations above).

    Args:
        layers, input_dim, hidden_dim, model: DyNet's.
        ln_lstm: layer normalisation of the stacked input and recurrent
            pre-activations (b + LN(W_x x) + LN(W_h h), peepholes outside)
            and of c before the output tanh.
        forget_bias: subtracted from the input gate's pre-activation, i.e.
            added to the forget gate's (f = 1 - i = sig(forget_bias - a_i));
            0 is DyNet's equation, 1 the usual "remember by default".
        learned_init, sum_outputs: see dyn/builders/rnn.py.

    ``set_dropout(d)`` (DyNet's): tied masks on each layer's input, on
    h_{t-1} and on the cell inside the peephole terms.

    Parameters per layer (DyNet's order): [W_xi, W_hi, W_ci, b_i, W_xo, W_ho,
    W_co, b_o, W_xc, W_hc, b_c].

    Example:
        >>> lstm = dy.LSTMBuilder(1, 4, 8, m)       # the same class
        >>> outs = lstm.initial_state().transduce(xs)
    """

    _has_cell = True
    _collection = "lstm-builder"
    _rates_of_set_dropout = ("x", "h", "c")
    _peephole_dim = None  # the hidden size (a full H x H matrix)

    def __init__(self, layers, input_dim, hidden_dim, model, ln_lstm=False, forget_bias=0.0, **options):
        self.forget_bias = float(forget_bias)
        options["layer_norm"] = bool(ln_lstm or options.get("layer_norm", False))
        super().__init__(layers, input_dim, hidden_dim, model, **options)

    def _layer_params(self, layer, in_dim):
        H = self.hidden_dim
        peep = self._peephole_dim or H
        ps = []
        for gate in "ioc":
            ps += [self._add((H, in_dim)), self._add((H, H))]
            if gate != "c":
                ps.append(self._add((H, peep)))
            ps.append(self._add(H, bias=True))
        return ps

    def _extra_params(self, layer, in_dim):
        H, e = self.hidden_dim, {}
        for k, n in (("x", 3 * H), ("h", 3 * H), ("c", H)):
            e["g" + k] = self.model.add_parameters(n, init=1.0, name="ln")
            e["b" + k] = self.model.add_parameters(n, init=0.0, name="ln")
        return e

    def _derive(self, layer, exprs, extra):
        Wxi, Whi, Wci, bi, Wxo, Who, Wco, bo, Wxc, Whc, bc = exprs
        return {
            "Wx": dy.concatenate([Wxi, Wxo, Wxc]),
            "Wh": dy.concatenate([Whi, Who, Whc]),
            "b": dy.concatenate([bi, bo, bc]),
            "Wci": Wci,
            "Wco": Wco,
        }

    def _recurrent(self, layer):
        return {"Wh": self._derived(layer)["Wh"]}

    def _peep(self, a, W, c, mask):
        if self._peephole_dim is not None:
            return a
        return dy.affine_transform([a, W, c if mask is None else dy.cmult(c, mask)])

    def _run_layer(self, layer, xs, prev, m):
        H, d, ln, e = self.hidden_dim, self._derived(layer), self.layer_norm, self._cg[3][layer]
        Wh = m["W"]["Wh"] if m["W"] else d["Wh"]
        X = xs[0] if len(xs) == 1 else dy.concatenate_cols(xs)
        if m["x"] is not None:
            X = dy.cmult(X, m["x"])
        P, T = (d["Wx"] * X if ln else dy.affine_transform([d["b"], d["Wx"], X])), len(xs)
        h, c = (prev.h, prev.get_c()) if prev is not None else (None, None)
        out = []
        for t in range(T):
            r = column(P, t, T)
            if ln:
                r = d["b"] + dy.layer_norm(r, e["gx"], e["bx"])
            if h is not None:
                hm = h if m["h"] is None else dy.cmult(h, m["h"])
                r = r + dy.layer_norm(Wh * hm, e["gh"], e["bh"]) if ln else dy.affine_transform([r, Wh, hm])
            ai = dy.pick_range(r, 0, H)
            if c is not None:
                ai = self._peep(ai, d["Wci"], c, m["c"])
            if self.forget_bias:
                ai = ai - self.forget_bias
            i = dy.logistic(ai)
            g = dy.tanh(dy.pick_range(r, 2 * H, 3 * H))
            if m["g"] is not None:
                g = dy.cmult(g, m["g"])
            cn = dy.cmult(i, g) if c is None else c + dy.cmult(i, g - c)  # f c + i g with f = 1 - i
            o = dy.logistic(self._peep(dy.pick_range(r, H, 2 * H), d["Wco"], cn, m["c"]))
            hn = dy.cmult(o, dy.tanh(dy.layer_norm(cn, e["gc"], e["bc"]) if ln else cn))
            h, c = self._zone(h, hn, self.zoneout[0]), self._zone(c, cn, self.zoneout[1])
            out.append(LayerState(h, c, H=H))
        return out

    def _options(self):
        opts = super()._options()
        opts["forget_bias"] = self.forget_bias
        return opts


LSTMBuilder = CoupledLSTMBuilder


class FastLSTMBuilder(CoupledLSTMBuilder):
    """DyNet's FastLSTMBuilder: the coupled LSTM without peepholes (its W_ci,
    W_co are H x 1 and unused, kept for DyNet's parameter layout). Unlike
    DyNet's, it supports dropout and dy.save.

    Example:
        >>> lstm = dy.FastLSTMBuilder(1, 4, 8, m)
    """

    _collection = "fast-lstm-builder"
    _peephole_dim = 1


for _cls in (CoupledLSTMBuilder, FastLSTMBuilder):
    _io.register_savable(_cls)
