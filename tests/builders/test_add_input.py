"""add_input, one step at a time (RNNBuilderBase._advance1 and the builders' _step1), against
add_inputs over the whole sequence (the path the numpy references check): the same states,
outputs and parameter gradients, for every recurrent builder and the options that change a
step (layers, sum_outputs, learned initial states, layer norm, variational and weight dropout,
zoneout at test time, batches)."""

import numpy as np
import pytest

import dyn as dy

BUILDERS = [
    dy.VanillaLSTMBuilder,
    dy.CompactVanillaLSTMBuilder,
    dy.SparseLSTMBuilder,
    dy.CoupledLSTMBuilder,
    dy.FastLSTMBuilder,
    dy.GRUBuilder,
    dy.SimpleRNNBuilder,
]
T, IN, H = 4, 3, 5

# option name -> (constructor keywords, setup applied to the builder); the random ones draw their
# masks once per graph (before the first step, in both paths), so one seed gives the same masks
OPTIONS = {
    "plain": ({}, None),
    "2-layers": ({"layers": 2}, None),
    "2-layers-sum_outputs": ({"layers": 2, "sum_outputs": True}, None),
    "learned_init": ({"learned_init": True}, None),
    "layer_norm": ({"layer_norm": True}, None),
    "dropout": ({"layers": 2}, lambda b: b.set_dropouts(0.3, 0.4)),
    "h_and_recurrent_dropout": ({}, lambda b: (b.set_dropouts(0.0, 0.4), b.set_recurrent_dropout(0.3))),
    "weight_dropout": ({}, lambda b: b.set_weight_dropout(0.3)),
    "zoneout_test_time": ({}, lambda b: (b.set_zoneout(0.3, 0.2), b.disable_dropout())),
}


def _make(cls, opts):
    kw, setup = OPTIONS[opts]
    kw = dict(kw)
    layers = kw.pop("layers", 1)
    if kw.get("layer_norm") and cls in (dy.SimpleRNNBuilder, dy.CompactVanillaLSTMBuilder):
        pytest.skip("%s has no layer norm" % cls.__name__)
    m = dy.ParameterCollection()
    b = cls(layers, IN, H, m, **kw)
    rng = np.random.RandomState(3)
    for p in m.parameters_list():
        p.set_value(rng.uniform(-0.5, 0.5, p.shape()))
    if setup is not None:
        setup(b)
    return m, b


def _run(m, b, xs, stepwise, batch):
    """Loss over every state's output and full state; its value, the states' values, the gradients."""
    for p in m.parameters_list():
        p.scale_gradient(0.0)
    dy.renew_cg()
    dy.reset_random_seed(11)
    inputs = [dy.inputTensor(x, batched=batch > 1) for x in xs]
    s0 = b.initial_state()
    if stepwise:
        states, s = [], s0
        for x in inputs:
            s = s.add_input(x)
            states.append(s)
    else:
        states = s0.add_inputs(inputs)
    exprs = [s.output() for s in states] + [e for s in states for e in s.s()]
    loss = dy.sum_batches(dy.esum([dy.dot_product(e, e) * (0.1 * (k + 1)) for k, e in enumerate(exprs)]))
    value = loss.value()
    loss.backward()
    grads = [p.grad_as_array().copy() for p in m.parameters_list()]
    return value, [e.npvalue() for e in exprs], grads


@pytest.mark.parametrize("opts", list(OPTIONS))
@pytest.mark.parametrize("cls", BUILDERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("batch", [1, 3])
def test_add_input_matches_add_inputs(float64, cls, opts, batch):
    m, b = _make(cls, opts)
    rng = np.random.RandomState(5)
    xs = [rng.uniform(-1, 1, (IN, batch) if batch > 1 else IN) for _ in range(T)]
    v1, e1, g1 = _run(m, b, xs, False, batch)
    v2, e2, g2 = _run(m, b, xs, True, batch)
    assert v1 == pytest.approx(v2, rel=1e-12)
    assert len(e1) == len(e2)
    for a, c in zip(e1, e2):
        np.testing.assert_allclose(c, a, rtol=1e-10, atol=1e-12)
    assert any(np.abs(g).max() > 0 for g in g1)
    for a, c in zip(g1, g2):
        np.testing.assert_allclose(c, a, rtol=1e-10, atol=1e-12)


def test_add_input_checks(float64):
    m = dy.ParameterCollection()
    b, other = dy.VanillaLSTMBuilder(1, IN, H, m), dy.VanillaLSTMBuilder(1, IN, H, m)
    dy.renew_cg()
    s = b.initial_state()
    with pytest.raises(ValueError, match="another builder"):
        b._advance1(other.initial_state(), dy.inputVector([0.0] * IN))
    old = s.add_input(dy.inputVector([0.0] * IN))
    dy.renew_cg()
    b.initial_state()
    with pytest.raises(ValueError, match="earlier computation graph"):
        old.add_input(dy.inputVector([0.0] * IN))
