"""The LSTM builders against float64 numpy references of their equations
(weights read with get_parameters), gradients, batches, tricks, saving."""

import numpy as np
import pytest

import dyn as dy
from tests.builders import _rnn_ref as ref

RNG = np.random.RandomState(10)
VANILLAS = [dy.VanillaLSTMBuilder, dy.CompactVanillaLSTMBuilder, dy.SparseLSTMBuilder]
COUPLED = [dy.CoupledLSTMBuilder, dy.FastLSTMBuilder]


def _xs(n, dim):
    return [RNG.uniform(-1, 1, dim) for _ in range(n)]


def _inputs(arrays):
    return [dy.inputVector(a) for a in arrays]


def _randomise(builder, seed):
    rng = np.random.RandomState(seed)
    for ps in builder.get_parameters():
        for p in ps[:3] if isinstance(builder, dy.SparseLSTMBuilder) else ps:
            p.set_value(rng.uniform(-0.5, 0.5, p.shape()))


def _reference(builder, xs, **kw):
    if isinstance(builder, dy.CoupledLSTMBuilder):
        step = ref.coupled
        kw.setdefault("peephole", not isinstance(builder, dy.FastLSTMBuilder))
        kw.setdefault("forget_bias", builder.forget_bias)
    else:
        step = ref.vanilla
        kw.setdefault("forget_bias", builder.forget_bias)
    return ref.stack(step, ref.arrays(builder), xs, **kw)


def test_lstm_builder_is_the_coupled_lstm():
    assert dy.LSTMBuilder is dy.CoupledLSTMBuilder
    m = dy.ParameterCollection()
    lstm = dy.LSTMBuilder(1, 3, 4, m, ln_lstm=False, forget_bias=1.0)  # DyNet's keywords accepted
    assert len(lstm.get_parameters()[0]) == 11 and lstm.param_collection().name() == "/lstm-builder/"
    assert "coupled" in dy.builders.lstm.__doc__.lower()


@pytest.mark.parametrize("cls", VANILLAS + COUPLED)
@pytest.mark.parametrize("layers", [1, 2])
def test_matches_reference(float64, cls, layers):
    m = dy.ParameterCollection()
    lstm = cls(layers, 3, 4, m)
    _randomise(lstm, 1)
    xs = _xs(5, 3)
    states = lstm.initial_state().add_inputs(_inputs(xs))
    want = _reference(lstm, xs)
    for t in range(5):
        s = states[t].s()
        for layer in range(layers):
            np.testing.assert_allclose(s[layer].npvalue(), want[layer][t][0], rtol=1e-9, atol=1e-12)  # c
            np.testing.assert_allclose(
                s[layers + layer].npvalue(), want[layer][t][1], rtol=1e-9, atol=1e-12
            )  # h
    outs = lstm.initial_state().transduce(_inputs(xs))
    np.testing.assert_allclose(outs[-1].npvalue(), want[-1][-1][1], rtol=1e-9)


@pytest.mark.parametrize("cls", [dy.VanillaLSTMBuilder, dy.CoupledLSTMBuilder])
def test_layer_norm_and_forget_bias(float64, cls):
    m = dy.ParameterCollection()
    lstm = cls(1, 3, 4, m, ln_lstm=True, forget_bias=0.7)
    _randomise(lstm, 2)
    rng = np.random.RandomState(3)
    for p in lstm._extra[0].values():
        p.set_value(rng.uniform(0.5, 1.5, p.shape()))
    xs = _xs(4, 3)
    out = lstm.initial_state().transduce(_inputs(xs))[-1].npvalue()
    extra = {k: p.as_array() for k, p in lstm._extra[0].items()}
    if cls is dy.VanillaLSTMBuilder:
        want = ref.vanilla(ref.arrays(lstm)[0], xs, forget_bias=0.7, extra=extra)[-1][1]
        np.testing.assert_allclose(out, want, rtol=1e-9)
    else:  # the coupled LSTM's layer norm: checked by its gradient and that it runs
        assert out.shape == (4,)
    assert len(lstm.get_parameters()[0]) in (3, 11)  # layer-norm parameters are not listed


def test_sparse_lstm_masks_and_sparsity(float64):
    m = dy.ParameterCollection()
    lstm = dy.SparseLSTMBuilder(1, 3, 4, m)
    Wx, Wh, b, Mx, Mh = lstm.get_parameters()[0]
    assert np.all(Mx.as_array() == 1) and not Mx.is_updated()
    lstm.set_sparsity(0.5)
    kept = Mx.as_array().sum() + Mh.as_array().sum()
    assert kept == (Wx.as_array().size + Wh.as_array().size) // 2
    xs = _xs(3, 3)
    out = lstm.initial_state().transduce(_inputs(xs))[-1].npvalue()
    ps = [Wx.as_array() * Mx.as_array(), Wh.as_array() * Mh.as_array(), b.as_array()]
    np.testing.assert_allclose(out, ref.vanilla(ps, xs)[-1][1], rtol=1e-9)


def test_set_s_and_set_h(float64):
    m = dy.ParameterCollection()
    lstm = dy.VanillaLSTMBuilder(2, 3, 4, m)
    _randomise(lstm, 4)
    c0, h0 = [RNG.uniform(-1, 1, 4) for _ in range(2)], [RNG.uniform(-1, 1, 4) for _ in range(2)]
    s = lstm.initial_state(_inputs(c0 + h0))
    assert len(s.s()) == 4
    xs = _xs(3, 3)
    out = s.transduce(_inputs(xs))
    ps = ref.arrays(lstm)
    l0 = ref.vanilla(ps[0], xs, state=(c0[0], h0[0]))
    l1 = ref.vanilla(ps[1], [st[1] for st in l0], state=(c0[1], h0[1]))
    np.testing.assert_allclose(out[-1].npvalue(), l1[-1][1], rtol=1e-9)
    # c only: h starts at zero
    sc = lstm.initial_state(_inputs(c0))
    np.testing.assert_allclose(sc.h()[0].npvalue(), 0)
    # set_h keeps the c of the step it follows
    s1 = s.add_input(dy.inputVector(xs[0]))
    s2 = s1.set_h(_inputs(h0))
    np.testing.assert_allclose(s2.s()[0].npvalue(), s1.s()[0].npvalue())
    np.testing.assert_allclose(s2.h()[1].npvalue(), h0[1])
    with pytest.raises(ValueError):
        s.set_s(_inputs(c0[:1]))


@pytest.mark.parametrize("cls", VANILLAS + COUPLED)
def test_gradients(float64, cls):
    m = dy.ParameterCollection()
    opts = {} if cls is dy.CompactVanillaLSTMBuilder else {"learned_init": True}
    lstm = cls(2, 2, 3, m, sum_outputs=True, **opts)
    _randomise(lstm, 5)
    for p in m.parameters_list():
        if p.name()[-2:] in ("h0", "c0") or "/h0_" in p.name() or "/c0_" in p.name():
            p.set_value(np.array([0.1, -0.2, 0.3]))
    outs = lstm.initial_state().transduce(_inputs(_xs(3, 2)))
    loss = dy.sum_elems(dy.cmult(dy.esum(outs), dy.inputVector([1.0, -2.0, 0.5])))
    trained = [p for p in m.parameters_list() if p.is_updated()]  # not SparseLSTM's constant masks
    assert dy.check_grad(loss, trained) == []


@pytest.mark.parametrize("cls", [dy.VanillaLSTMBuilder, dy.CoupledLSTMBuilder])
def test_gradients_with_layer_norm_and_tricks(float64, cls):
    m = dy.ParameterCollection()
    lstm = cls(1, 2, 3, m, ln_lstm=True)
    _randomise(lstm, 6)
    lstm.set_zoneout(0.2, 0.1)
    lstm.disable_dropout()  # deterministic zoneout (expectation) for the finite differences
    outs = lstm.initial_state().transduce(_inputs(_xs(3, 2)))
    loss = dy.sum_elems(dy.cmult(dy.esum(outs), dy.inputVector([1.0, -2.0, 0.5])))
    assert dy.check_grad(loss) == []


@pytest.mark.parametrize("cls", VANILLAS + COUPLED)
def test_batched_equals_loop(float64, cls):
    m = dy.ParameterCollection()
    lstm = cls(2, 3, 4, m)
    _randomise(lstm, 7)
    B, xs = 3, [RNG.uniform(-1, 1, (3, 3)) for _ in range(4)]
    outs = lstm.initial_state().transduce([dy.inputTensor(x, batched=True) for x in xs])
    got = outs[-1].npvalue()
    for k in range(B):
        dy.renew_cg()
        want = lstm.initial_state().transduce([dy.inputVector(x[:, k]) for x in xs])[-1].npvalue()
        np.testing.assert_allclose(got[:, k], want, rtol=1e-9)


def test_vanilla_dropout_masks_in_the_reference(float64):
    """set_dropouts + recurrent dropout, batched: each element follows the
    reference with its own (read back) masks, the same at every step."""
    m = dy.ParameterCollection()
    lstm = dy.VanillaLSTMBuilder(1, 3, 4, m)
    _randomise(lstm, 8)
    lstm.set_dropouts(0.3, 0.4)
    lstm.set_recurrent_dropout(0.5)
    B, xs = 2, [RNG.uniform(-1, 1, (3, 2)) for _ in range(4)]
    outs = lstm.initial_state().transduce([dy.inputTensor(x, batched=True) for x in xs])
    masks = {k: v.npvalue() for k, v in lstm._cg[5][0].items() if k in "xhg" and v is not None}
    assert all(v.shape[-1] == B for v in masks.values())
    for k in range(B):
        want = ref.vanilla(
            ref.arrays(lstm)[0], [x[:, k] for x in xs], masks={n: v[:, k] for n, v in masks.items()}
        )
        np.testing.assert_allclose(outs[-1].npvalue()[:, k], want[-1][1], rtol=1e-9)


def test_coupled_dropout_masks_in_the_reference(float64):
    m = dy.ParameterCollection()
    lstm = dy.CoupledLSTMBuilder(1, 3, 4, m)
    _randomise(lstm, 9)
    lstm.set_dropout(0.3)  # x, h and the peephole cell (DyNet)
    xs = _xs(4, 3)
    out = lstm.initial_state().transduce(_inputs(xs))[-1].npvalue()
    masks = {k: v.npvalue() for k, v in lstm._cg[5][0].items() if k in "xhc" and v is not None}
    assert set(masks) == {"x", "h", "c"}
    np.testing.assert_allclose(out, ref.coupled(ref.arrays(lstm)[0], xs, masks=masks)[-1][1], rtol=1e-9)


def test_zoneout_eval_and_weight_dropout(float64):
    m = dy.ParameterCollection()
    lstm = dy.VanillaLSTMBuilder(1, 3, 4, m)
    _randomise(lstm, 10)
    lstm.set_zoneout(0.25, 0.5)
    lstm.disable_dropout()
    xs = _xs(3, 3)
    states = lstm.initial_state().add_inputs(_inputs(xs))
    ps, c, h = ref.arrays(lstm)[0], None, None
    for t, x in enumerate(xs):
        cn, hn = ref.vanilla(ps, [x], state=None if c is None else (c, h))[0]
        c = 0.5 * cn + 0.5 * (c if c is not None else 0)
        h = 0.75 * hn + 0.25 * (h if h is not None else 0)
        np.testing.assert_allclose(states[t].s()[0].npvalue(), c, rtol=1e-9)
        np.testing.assert_allclose(states[t].output().npvalue(), h, rtol=1e-9)
    dy.renew_cg()
    lstm.zoneout = (0.0, 0.0)
    lstm.set_weight_dropout(0.5)
    out = lstm.initial_state().transduce(_inputs(xs))[-1].npvalue()
    Wd = lstm._cg[5][0]["W"]["Wh"].npvalue()
    assert 0 < np.count_nonzero(Wd) < Wd.size
    np.testing.assert_allclose(out, ref.vanilla([ps[0], Wd, ps[2]], xs)[-1][1], rtol=1e-9)


def test_compact_weight_noise_runs_and_differs(float64):
    m = dy.ParameterCollection()
    lstm = dy.CompactVanillaLSTMBuilder(1, 3, 4, m)
    xs = _inputs(_xs(3, 3))
    clean = lstm.initial_state().transduce(xs)[-1].npvalue()
    lstm.set_weightnoise(0.1)
    dy.renew_cg()
    xs = _inputs(_xs(3, 3))
    noisy = lstm.initial_state().transduce(xs)[-1].npvalue()
    assert noisy.shape == clean.shape and not np.allclose(noisy, clean)
    with pytest.raises(ValueError):
        lstm.set_weightnoise(-1)


def test_user_written_lstm_gives_the_same_numbers():
    """A standard LSTM written with plain operations, as a user would, and
    VanillaLSTMBuilder (fused path, float32) agree."""
    m = dy.ParameterCollection()
    lstm = dy.VanillaLSTMBuilder(1, 5, 6, m, forget_bias=1.0)
    _randomise(lstm, 11)
    Wx, Wh, b = lstm.get_parameters()[0]
    xs = _xs(6, 5)
    H = 6
    h = c = None
    mine = []
    for x in _inputs(xs):
        a = dy.affine_transform([b, Wx, x]) if h is None else dy.affine_transform([b, Wx, x, Wh, h])
        i = dy.logistic(dy.pick_range(a, 0, H))
        f = dy.logistic(dy.pick_range(a, H, 2 * H) + 1.0)
        o = dy.logistic(dy.pick_range(a, 2 * H, 3 * H))
        g = dy.tanh(dy.pick_range(a, 3 * H, 4 * H))
        c = dy.cmult(i, g) if c is None else dy.cmult(f, c) + dy.cmult(i, g)
        h = dy.cmult(o, dy.tanh(c))
        mine.append(h)
    theirs = lstm.initial_state().transduce(_inputs(xs))
    for a, bb in zip(mine, theirs):
        np.testing.assert_allclose(a.npvalue(), bb.npvalue(), rtol=1e-5, atol=1e-6)
    # and the same gradients
    dy.sum_elems(dy.esum(mine)).backward()
    g1 = [p.grad_as_array() for p in (Wx, Wh, b)]
    for p in (Wx, Wh, b):
        p.scale_gradient(0.0)
    dy.sum_elems(dy.esum(theirs)).backward()
    for g, p in zip(g1, (Wx, Wh, b)):
        np.testing.assert_allclose(p.grad_as_array(), g, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("cls", VANILLAS + COUPLED)
def test_save_load_round_trip(tmp_path, float64, cls):
    m = dy.ParameterCollection()
    opts = (
        {}
        if cls is dy.CompactVanillaLSTMBuilder
        else {"ln_lstm": cls is not dy.SparseLSTMBuilder, "forget_bias": 0.5}
    )
    lstm = cls(2, 3, 4, m, learned_init=True, **opts)
    _randomise(lstm, 12)
    for p in m.parameters_list():  # layer norm and initial states too
        p.set_value(p.as_array() + 0.1)
    base = str(tmp_path / "lstm")
    dy.save(base, [lstm])
    (lstm2,) = dy.load(base, dy.ParameterCollection())
    assert type(lstm2) is cls and lstm2.spec == lstm.spec
    xs = _xs(3, 3)
    y1 = lstm.initial_state().transduce(_inputs(xs))[-1].npvalue()
    y2 = lstm2.initial_state().transduce(_inputs(xs))[-1].npvalue()
    np.testing.assert_array_equal(y1, y2)
