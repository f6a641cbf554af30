"""Recurrent builders with DyNet's API: RNNState, StackedRNNState,
SimpleRNNBuilder and GRUBuilder (the LSTMs and BiRNNBuilder are in lstm.py).

A builder owns the parameters; ``initial_state()`` (cached per graph, as
DyNet) gives an :class:`RNNState`; ``add_input``, ``add_inputs`` and
``transduce`` run it. Every builder takes DyNet's constructor
``(layers, input_dim, hidden_dim, model)``; dims may be integral floats.

Speed: a builder runs a whole input list layer by layer, so each layer's
input projections (all gates) are ONE matrix-matrix product ``b + Wx [x_1 ..
x_T]``; each step then adds the recurrent product of all gates at once.

Training tricks (options; the defaults are DyNet's behaviour):

* ``set_dropout(d)`` / ``set_dropouts(d, d_h)``: variational dropout with
  tied masks (Gal & Ghahramani 2016): one mask per layer for the inputs and
  one for the recurrent state, sampled once per graph and shared by every
  step and every sequence run through the builder in that graph (DyNet's
  rule); a batched input gets a mask per batch element. When: the default
  regulariser for recurrent nets; 0.2-0.5 on small data. (GRUBuilder's
  ``set_dropout`` is DyNet's per-step input and output dropout instead.)
* ``set_recurrent_dropout(p)``: dropout on the cell update only (Semeniuta
  et al. 2016: the LSTM candidate g, the GRU candidate h~), tied per
  sequence. When: you want dropout inside the recurrence without erasing
  the memory, e.g. language models; combine with input dropout.
* ``set_zoneout(z_h, z_c=None)``: zoneout (Krueger et al. 2017): each unit
  keeps its previous value with probability z (fresh per step); after
  ``disable_dropout()`` the expectation is used. When: long sequences where
  dropout hurts the memory (character models, speech); 0.05-0.15 for c, h.
* ``set_weight_dropout(p)``: DropConnect on the recurrent matrices (Wan et
  al. 2013, the "weight drop" of Merity et al.'s AWD-LSTM), one mask per
  graph shared by the batch. When: strong regularisation of large LSTM
  language models without touching the activations.
* ``layer_norm=True`` (``ln_lstm=True`` for VanillaLSTMBuilder): layer
  normalisation of the input and recurrent pre-activations (and of c before
  its tanh for LSTMs), Ba et al. 2016. When: deep or long-running recurrent
  nets that train slowly or unstably; it costs more per step (no fused path).
* ``learned_init=True``: a trainable initial state (h0, and c0 for LSTMs)
  per layer instead of zeros. When: short sequences, where the start state
  matters.
* ``forget_bias`` (LSTMs, 1.0 for VanillaLSTMBuilder as DyNet) and
  ``reset_bias`` / ``update_bias`` (GRU): constants added to a gate's
  pre-activation. Forget bias 1 (Jozefowicz et al. 2015) keeps the memory
  open early in training; reset bias -1 starts the GRU's candidate leaning on
  the input rather than the previous state. When: always fine for LSTMs;
  try the GRU biases when long dependencies are slow to learn.
* ``sum_outputs=True``: with several layers, ``output()`` is the sum of every
  layer's h (a residual-style read-out; h() still gives each layer).
  When: deep stacks, to give lower layers a direct path to the loss.
* ``disable_dropout()``: evaluation mode for all of the above.

Example:
    >>> m = dy.ParameterCollection()
    >>> gru = dy.GRUBuilder(2, 8, 16, m, reset_bias=-1.0)
    >>> gru.set_dropouts(0.2, 0.2)
    >>> outs = gru.initial_state().transduce(xs)
"""

from __future__ import annotations

import dyn as dy
from dyn import io as _io
from dyn.builders._rnn_base import LayerState, RNNBuilderBase, RNNState, StackedRNNState, check_rate, column

__all__ = ["RNNState", "StackedRNNState", "SimpleRNNBuilder", "GRUBuilder"]


def _stack(xs):
    return xs[0] if len(xs) == 1 else dy.concatenate_cols(xs)


class SimpleRNNBuilder(RNNBuilderBase):
    """Elman RNN (DyNet's SimpleRNNBuilder), per layer:

        h_t = tanh(b + W_x x_t + W_h h_{t-1})       (first step: tanh(b + W_x x_t))

    Parameters per layer: [W_x (H x in), W_h (H x H), b (H)].

    Example:
        >>> rnn = dy.SimpleRNNBuilder(1, 4, 8, m)
        >>> h = rnn.initial_state().add_input(x).output()
    """

    _collection = "simple-rnn-builder"

    def _layer_params(self, layer, in_dim):
        H = self.hidden_dim
        return [self._add((H, in_dim)), self._add((H, H)), self._add(H, bias=True)]

    def _extra_params(self, layer, in_dim):
        raise ValueError("SimpleRNNBuilder has no layer_norm option (GRUBuilder and the LSTMs have)")

    def _recurrent(self, layer):
        return {"Wh": self._cg[1][layer][1]}

    def _run_layer(self, layer, xs, prev, m):
        Wx, Wh, b = self._cg[1][layer]
        if m["W"]:
            Wh = m["W"]["Wh"]
        X = _stack(xs)
        if m["x"] is not None:
            X = dy.cmult(X, m["x"])
        P, T = dy.affine_transform([b, Wx, X]), len(xs)
        h, out = prev.h if prev is not None else None, []
        for t in range(T):
            p = column(P, t, T)
            if h is not None:
                p = dy.affine_transform([p, Wh, h if m["h"] is None else dy.cmult(h, m["h"])])
            h = self._zone(h, dy.tanh(p), self.zoneout[0])
            out.append(LayerState(h))
        return out


class GRUBuilder(RNNBuilderBase):
    """Gated recurrent unit (DyNet's GRUBuilder), per layer:

        z = sig(b_z + W_xz x + W_hz h_{t-1} + update_bias)
        r = sig(b_r + W_xr x + W_hr h_{t-1} + reset_bias)
        h~ = tanh(b_h + W_xh x + W_hh (r * h_{t-1}))
        h_t = (1 - z) * h_{t-1} + z * h~           (first step: z * tanh(b_h + W_xh x))

    Parameters per layer (DyNet's order): [W_xz, W_hz, b_z, W_xr, W_hr, b_r,
    W_xh, W_hh, b_h]. The three input matrices are used stacked (one product
    for the sequence), W_hz and W_hr stacked (one product per step).

    ``set_dropout(d)`` is DyNet's: dropout(x, d) on every layer's input at
    every step and on the returned output (h() is undropped);
    ``set_dropouts(d, d_h)`` is variational (tied masks) on x and h.
    layer_norm: z, r pre-activations b + LN(W_x x) + LN(W_h h), the candidate
    b_h + LN(W_xh x) + LN(W_hh (r h)).

    Example:
        >>> gru = dy.GRUBuilder(1, 4, 8, m, reset_bias=-1.0)
        >>> outs = gru.initial_state().transduce(xs)
    """

    _collection = "gru-builder"

    def __init__(self, layers, input_dim, hidden_dim, model, *, reset_bias=0.0, update_bias=0.0, **options):
        self.reset_bias, self.update_bias = float(reset_bias), float(update_bias)
        self.plain_dropout = 0.0
        super().__init__(layers, input_dim, hidden_dim, model, **options)

    def _layer_params(self, layer, in_dim):
        H, ps = self.hidden_dim, []
        for _ in range(3):
            ps += [self._add((H, in_dim)), self._add((H, H)), self._add(H, bias=True)]
        return ps

    def _extra_params(self, layer, in_dim):
        H, e = self.hidden_dim, {}
        for k, n in (("x", 3 * H), ("h", 2 * H), ("hh", H)):
            e["g" + k] = self.model.add_parameters(n, init=1.0, name="ln")
            e["b" + k] = self.model.add_parameters(n, init=0.0, name="ln")
        return e

    def _derive(self, layer, exprs, extra):
        Wxz, Whz, bz, Wxr, Whr, br, Wxh, Whh, bh = exprs
        d = {
            "Wx": dy.concatenate([Wxz, Wxr, Wxh]),
            "b": dy.concatenate([bz, br, bh]),
            "Whzr": dy.concatenate([Whz, Whr]),
            "Whh": Whh,
            "bias": None,
        }
        if self.reset_bias or self.update_bias:
            H = self.hidden_dim
            d["bias"] = dy.inputVector([self.update_bias] * H + [self.reset_bias] * H)
        return d

    def _recurrent(self, layer):
        d = self._derived(layer)
        return {"zr": d["Whzr"], "hh": d["Whh"]}

    def set_dropout(self, d):
        """DyNet's GRU dropout: per-step dropout(x, d) on each layer's input and on output()."""
        self.plain_dropout = check_rate(d)

    def disable_dropout(self):
        super().disable_dropout()
        self.plain_dropout = 0.0

    def _outputs(self, per_layer, T):
        outs = super()._outputs(per_layer, T)
        if self.plain_dropout > 0:
            outs = [dy.dropout(o, self.plain_dropout) for o in outs]
        return outs

    def _run_layer(self, layer, xs, prev, m):
        H, d, ln = self.hidden_dim, self._derived(layer), self.layer_norm
        W = m["W"] or {}
        Whzr, Whh = W.get("zr", d["Whzr"]), W.get("hh", d["Whh"])
        X = _stack(xs)
        if self.plain_dropout > 0:
            X = dy.dropout(X, self.plain_dropout)
        if m["x"] is not None:
            X = dy.cmult(X, m["x"])
        P, T = (d["Wx"] * X if ln else dy.affine_transform([d["b"], d["Wx"], X])), len(xs)
        e = self._cg[3][layer]
        h, out = prev.h if prev is not None else None, []
        for t in range(T):
            p = column(P, t, T)
            if ln:
                p = d["b"] + dy.layer_norm(p, e["gx"], e["bx"])
            hm = h if h is None or m["h"] is None else dy.cmult(h, m["h"])
            zr = dy.pick_range(p, 0, 2 * H)
            if h is not None:
                zr = (
                    zr + dy.layer_norm(Whzr * hm, e["gh"], e["bh"])
                    if ln
                    else dy.affine_transform([zr, Whzr, hm])
                )
            if d["bias"] is not None:
                zr = zr + d["bias"]
            zr = dy.logistic(zr)
            z, cand = dy.pick_range(zr, 0, H), dy.pick_range(p, 2 * H, 3 * H)
            if h is not None:
                rh = dy.cmult(dy.pick_range(zr, H, 2 * H), hm)
                cand = (
                    cand + dy.layer_norm(Whh * rh, e["ghh"], e["bhh"])
                    if ln
                    else dy.affine_transform([cand, Whh, rh])
                )
            cand = dy.tanh(cand)
            if m["g"] is not None:
                cand = dy.cmult(cand, m["g"])
            hn = dy.cmult(z, cand) if h is None else h + dy.cmult(z, cand - h)
            h = self._zone(h, hn, self.zoneout[0])
            out.append(LayerState(h))
        return out

    def _options(self):
        opts = super()._options()
        opts.update(reset_bias=self.reset_bias, update_bias=self.update_bias)
        return opts


for _cls in (SimpleRNNBuilder, GRUBuilder):
    _io.register_savable(_cls)

# the state classes are part of this module's public face
RNNState = RNNState
StackedRNNState = StackedRNNState
