"""BiRNNBuilder: DyNet's bidirectional stack of recurrent builders."""

from __future__ import annotations

import dyn as dy
from dyn import io as _io
from dyn.builders._rnn_base import as_dim

__all__ = ["BiRNNBuilder"]


class BiRNNBuilder:
    """Layers of (forward, backward) 1-layer builders; each layer's output at
    position t is concatenate([forward h_t, backward h_t]).

    Args:
        num_layers: number of bidirectional layers (> 0).
        input_dim: size of the inputs.
        hidden_dim: size of the outputs (even; each direction gets half).
        model: the ParameterCollection (a "birnn" sub-collection is made).
        rnn_builder_factory: a builder class such as dy.VanillaLSTMBuilder,
            called as factory(1, in_dim, hidden_dim / 2, model).
        builder_layers: optional list of ready (forward, backward) builders.

    Example:
        >>> bi = dy.BiRNNBuilder(2, 8, 16, m, dy.VanillaLSTMBuilder)
        >>> outs = bi.transduce(xs)          # 16-dim vectors
    """

    def __init__(self, num_layers, input_dim, hidden_dim, model, rnn_builder_factory, builder_layers=None):
        self.model = model.add_subcollection("birnn")
        num_layers = as_dim(num_layers, "num_layers")
        hidden_dim = as_dim(hidden_dim, "hidden_dim")
        if num_layers <= 0:
            raise ValueError("BiRNNBuilder: num_layers must be > 0")
        if hidden_dim % 2:
            raise ValueError("BiRNNBuilder: hidden_dim must be even, got %d" % hidden_dim)
        if builder_layers is None:
            builder_layers = []
            for layer in range(num_layers):
                in_dim = input_dim if layer == 0 else hidden_dim
                builder_layers.append(
                    (
                        rnn_builder_factory(1, in_dim, hidden_dim / 2, self.model),
                        rnn_builder_factory(1, in_dim, hidden_dim / 2, self.model),
                    )
                )
            self.spec = (num_layers, input_dim, hidden_dim, rnn_builder_factory, None)
        else:
            builder_layers = [tuple(p) for p in builder_layers]
            self.spec = None  # ready-made builders cannot be described by a spec
        self.builder_layers = builder_layers

    def whoami(self):
        return "BiRNNBuilder"

    def param_collection(self):
        return self.model

    @classmethod
    def from_spec(cls, spec, model):
        num_layers, input_dim, hidden_dim, factory, _ = spec
        return cls(num_layers, input_dim, hidden_dim, model, factory)

    def set_dropout(self, p):
        for f, b in self.builder_layers:
            f.set_dropout(p)
            b.set_dropout(p)

    def disable_dropout(self):
        for f, b in self.builder_layers:
            f.disable_dropout()
            b.disable_dropout()

    def _layer(self, f, b, es):
        fs = f.initial_state().transduce(es)
        bs = b.initial_state().transduce(es[::-1])
        return [dy.concatenate([x, y]) for x, y in zip(fs, bs[::-1])]

    def transduce(self, es):
        """The hidden_dim outputs, one per input."""
        es = list(es)
        for f, b in self.builder_layers:
            es = self._layer(f, b, es)
        return es

    def add_inputs(self, es):
        """The (forward state, backward state) pairs of the last layer, one per input."""
        es = list(es)
        for f, b in self.builder_layers[:-1]:
            es = self._layer(f, b, es)
        f, b = self.builder_layers[-1]
        fs = f.initial_state().add_inputs(es)
        bs = b.initial_state().add_inputs(es[::-1])
        return list(zip(fs, bs[::-1]))


_io.register_savable(BiRNNBuilder)
