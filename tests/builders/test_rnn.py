"""SimpleRNNBuilder, GRUBuilder and the RNNState API against float64 numpy
references of their equations (weights read with get_parameters)."""

import numpy as np
import pytest

import dyn as dy
from tests.builders import _rnn_ref as ref

RNG = np.random.RandomState(0)


def _xs(n, dim, rng=RNG):
    return [rng.uniform(-1, 1, dim) for _ in range(n)]


def _inputs(arrays):
    return [dy.inputVector(a) for a in arrays]


def _randomise(builder, rng):
    """Non-zero biases too, so that the reference sees every term."""
    for ps in builder.get_parameters():
        for p in ps:
            p.set_value(rng.uniform(-0.5, 0.5, p.shape()))


@pytest.mark.parametrize("layers", [1, 2])
def test_simple_rnn_matches_reference(float64, layers):
    m = dy.ParameterCollection()
    rnn = dy.SimpleRNNBuilder(layers, 3, 4, m)
    _randomise(rnn, np.random.RandomState(1))
    xs = _xs(5, 3)
    outs = rnn.initial_state().transduce(_inputs(xs))
    want = ref.stack(ref.simple, ref.arrays(rnn), xs)
    for t in range(5):
        np.testing.assert_allclose(outs[t].npvalue(), want[-1][t][0], rtol=1e-10)


@pytest.mark.parametrize("ln", [False, True])
@pytest.mark.parametrize("biases", [(0.0, 0.0), (-1.0, 0.5)])
def test_gru_matches_reference(float64, ln, biases):
    m = dy.ParameterCollection()
    gru = dy.GRUBuilder(2, 3, 4, m, reset_bias=biases[0], update_bias=biases[1], layer_norm=ln)
    _randomise(gru, np.random.RandomState(2))
    xs = _xs(4, 3)
    states = gru.initial_state().add_inputs(_inputs(xs))
    layers_in = xs
    for layer, ps in enumerate(ref.arrays(gru)):
        extra = {k: p.as_array() for k, p in gru._extra[layer].items()} if ln else None
        want = ref.gru(ps, layers_in, reset_bias=biases[0], update_bias=biases[1], extra=extra)
        for t in range(4):
            np.testing.assert_allclose(states[t].h()[layer].npvalue(), want[t][0], rtol=1e-9, atol=1e-12)
        layers_in = [w[0] for w in want]


def test_parameters_and_names_follow_dynet(float64):
    m = dy.ParameterCollection()
    gru = dy.GRUBuilder(2, 3, 4, m)
    rnn = dy.SimpleRNNBuilder(1, 3.0, 4.0, m)  # integral floats accepted (BiRNNBuilder passes hidden/2)
    assert [p.shape() for p in gru.get_parameters()[1]] == [(4, 4), (4, 4), (4,)] * 3
    assert [p.shape() for p in rnn.get_parameters()[0]] == [(4, 3), (4, 4), (4,)]
    assert gru.param_collection().name() == "/gru-builder/"
    assert rnn.param_collection().name() == "/simple-rnn-builder/"
    assert np.all(gru.get_parameters()[0][2].as_array() == 0)  # biases start at zero
    with pytest.raises(ValueError):
        dy.SimpleRNNBuilder(1, 2.5, 4, m)
    assert dy.SimpleRNNBuilder(0, 3, 4, m).initial_state().transduce([]) == []


def test_state_api(float64):
    m = dy.ParameterCollection()
    rnn = dy.SimpleRNNBuilder(2, 3, 4, m)
    with pytest.raises(ValueError, match="initial_state"):
        rnn.get_parameter_expressions()
    s0 = rnn.initial_state()
    assert rnn.initial_state() is s0  # cached per graph
    assert s0.output() is None and s0.h() == () and s0.s() == () and s0.prev() is None
    x = dy.inputVector([0.1, 0.2, 0.3])
    s1 = s0.add_input(x)
    s2 = s1.add_input(x)
    assert s2.prev() is s1 and s1.prev() is s0 and s2.b() is rnn
    assert len(s2.h()) == 2 and s2.s() == s2.h()
    np.testing.assert_allclose(s2.output().npvalue(), s2.h()[-1].npvalue())
    assert len(rnn.get_parameter_expressions()) == 2
    # set_h: a new state continuing from the given h
    hs = [dy.inputVector([0.5, -0.5, 0.2, 0.1]) for _ in range(2)]
    s3 = s2.set_h(hs)
    assert s3.prev() is s2
    np.testing.assert_allclose(s3.output().npvalue(), hs[-1].npvalue())
    y = s3.add_input(x).output().npvalue()
    want = ref.stack(ref.simple, ref.arrays(rnn), [x.npvalue()], h=None)  # only for shapes
    assert y.shape == want[-1][0][0].shape
    s4 = rnn.initial_state([dy.inputVector(np.zeros(4))] * 2)  # vecs: set_s on the initial state
    assert s4.prev() is s0
    with pytest.raises(ValueError):
        s0.set_h(hs[:1])
    dy.renew_cg()
    assert rnn.initial_state() is not s0
    with pytest.raises(ValueError, match="earlier computation graph"):
        s2.add_input(dy.inputVector([0.1, 0.2, 0.3]))


def test_initial_state_given_equals_continuing(float64):
    """initial_state(vecs) then inputs = the reference started from those h."""
    m = dy.ParameterCollection()
    gru = dy.GRUBuilder(1, 3, 4, m)
    _randomise(gru, np.random.RandomState(3))
    h0 = RNG.uniform(-1, 1, 4)
    xs = _xs(3, 3)
    outs = gru.initial_state([dy.inputVector(h0)]).transduce(_inputs(xs))
    want = ref.gru(ref.arrays(gru)[0], xs, h=h0)
    np.testing.assert_allclose(outs[-1].npvalue(), want[-1][0], rtol=1e-10)


@pytest.mark.parametrize("cls", [dy.SimpleRNNBuilder, dy.GRUBuilder])
def test_gradients(float64, cls):
    m = dy.ParameterCollection()
    b = cls(2, 2, 3, m, learned_init=True, sum_outputs=True)
    _randomise(b, np.random.RandomState(4))
    for p in m.parameters_list():
        if p.name().endswith("h0"):
            p.set_value(np.array([0.1, -0.2, 0.3]))
    outs = b.initial_state().transduce(_inputs(_xs(3, 2)))
    loss = dy.sum_elems(dy.cmult(dy.esum(outs), dy.inputVector([1.0, -2.0, 0.5])))
    assert dy.check_grad(loss) == []


@pytest.mark.parametrize("cls", [dy.SimpleRNNBuilder, dy.GRUBuilder])
def test_batched_equals_loop(float64, cls):
    m = dy.ParameterCollection()
    b = cls(2, 3, 4, m)
    _randomise(b, np.random.RandomState(5))
    B, xs = 3, [RNG.uniform(-1, 1, (3, 3)) for _ in range(4)]
    outs = b.initial_state().transduce([dy.inputTensor(x, batched=True) for x in xs])
    got = outs[-1].npvalue()
    for k in range(B):
        dy.renew_cg()
        want = b.initial_state().transduce([dy.inputVector(x[:, k]) for x in xs])[-1].npvalue()
        np.testing.assert_allclose(got[:, k], want, rtol=1e-10)


def test_variational_masks_are_tied(float64):
    """One mask for the whole sequence, shared by the graph's sequences;
    per batch element; fresh in the next graph."""
    m = dy.ParameterCollection()
    rnn = dy.SimpleRNNBuilder(1, 20, 20, m)
    rnn.get_parameters()[0][1].set_value(np.zeros((20, 20)))  # no recurrence: h_t = f(x_t * mask)
    rnn.set_dropouts(0.5, 0.0)
    x = np.ones(20)
    outs = rnn.initial_state().transduce(_inputs([x] * 3))
    vals = [o.npvalue() for o in outs]
    np.testing.assert_allclose(vals[0], vals[2])
    again = rnn.initial_state().add_input(dy.inputVector(x)).output().npvalue()
    np.testing.assert_allclose(again, vals[0])  # same graph: same masks
    dy.renew_cg()
    batch = rnn.initial_state().transduce([dy.inputTensor(np.ones((20, 2)), batched=True)] * 2)
    b = [o.npvalue() for o in batch]
    np.testing.assert_allclose(b[0], b[1])
    assert not np.allclose(b[0][:, 0], b[0][:, 1])  # one mask per batch element
    rnn.disable_dropout()
    dy.renew_cg()
    clean = rnn.initial_state().add_input(dy.inputVector(x)).output().npvalue()
    want = np.tanh(rnn.get_parameters()[0][0].as_array() @ x + rnn.get_parameters()[0][2].as_array())
    np.testing.assert_allclose(clean, want, rtol=1e-10)


def test_dropout_masks_in_the_reference(float64):
    """The sampled masks (read back) give the reference's numbers: x, h, g masks."""
    m = dy.ParameterCollection()
    gru = dy.GRUBuilder(1, 3, 4, m)
    _randomise(gru, np.random.RandomState(6))
    gru.set_dropouts(0.3, 0.4)
    gru.set_recurrent_dropout(0.5)
    s0 = gru.initial_state()
    gru.set_dropout_masks(1)
    xs = _xs(4, 3)
    outs = s0.transduce(_inputs(xs))
    masks = {k: v.npvalue() for k, v in gru._cg[5][0].items() if k in "xhg" and v is not None}
    assert set(masks) == {"x", "h", "g"}
    want = ref.gru(ref.arrays(gru)[0], xs, masks=masks)
    np.testing.assert_allclose(outs[-1].npvalue(), want[-1][0], rtol=1e-10)


def test_gru_dynet_dropout_is_per_step_on_input_and_output(float64):
    m = dy.ParameterCollection()
    gru = dy.GRUBuilder(1, 30, 30, m)
    gru.set_dropout(0.5)
    s = gru.initial_state().add_input(dy.inputVector(np.ones(30)))
    assert np.count_nonzero(s.output().npvalue() == 0) > 0  # the output is dropped out
    assert np.count_nonzero(s.h()[0].npvalue() == 0) == 0  # h() is not
    gru.disable_dropout()
    assert gru.plain_dropout == 0.0


def test_zoneout_train_and_eval(float64):
    m = dy.ParameterCollection()
    rnn = dy.SimpleRNNBuilder(1, 3, 4, m)
    _randomise(rnn, np.random.RandomState(7))
    rnn.set_zoneout(0.3)
    xs = _xs(3, 3)
    train = [o.npvalue() for o in rnn.initial_state().transduce(_inputs(xs))]
    # training: each unit is either the new value or the previous one
    fresh = ref.simple(ref.arrays(rnn)[0], xs[1:2], h=train[0])[0][0]
    assert all(np.isclose(train[1][j], fresh[j]) or np.isclose(train[1][j], train[0][j]) for j in range(4))
    rnn.disable_dropout()
    dy.renew_cg()
    evals = [o.npvalue() for o in rnn.initial_state().transduce(_inputs(xs))]
    h = None
    for t, x in enumerate(xs):
        new = ref.simple(ref.arrays(rnn)[0], [x], h=h)[0][0]
        h = 0.7 * new + 0.3 * (h if h is not None else 0)
        np.testing.assert_allclose(evals[t], h, rtol=1e-10)


def test_weight_dropout_drops_recurrent_weights_once_per_graph(float64):
    m = dy.ParameterCollection()
    rnn = dy.SimpleRNNBuilder(1, 3, 6, m)
    rnn.set_weight_dropout(0.5)
    rnn.initial_state()
    rnn.set_dropout_masks()
    Wd = rnn._cg[5][0]["W"]["Wh"].npvalue()
    W = rnn.get_parameters()[0][1].as_array()
    kept = Wd != 0
    assert 0 < kept.sum() < W.size
    np.testing.assert_allclose(Wd[kept], 2 * W[kept])
    xs = _xs(3, 3)
    outs = rnn.initial_state().transduce(_inputs(xs))
    h = np.tanh(rnn.get_parameters()[0][0].as_array() @ xs[0] + rnn.get_parameters()[0][2].as_array())
    h = np.tanh(rnn.get_parameters()[0][0].as_array() @ xs[1] + Wd @ h)
    np.testing.assert_allclose(outs[1].npvalue(), h, rtol=1e-10)


def test_stacked_rnn_state(float64):
    m = dy.ParameterCollection()
    a, b = dy.SimpleRNNBuilder(1, 3, 4, m), dy.GRUBuilder(1, 4, 2, m)
    st = dy.StackedRNNState([a.initial_state(), b.initial_state()])
    xs = _inputs(_xs(3, 3))
    outs = st.transduce(xs)
    want = b.initial_state().transduce(a.initial_state().transduce(xs))
    np.testing.assert_allclose(outs[-1].npvalue(), want[-1].npvalue())
    s = st.add_input(xs[0])
    assert s.prev() is st and len(s.h()) == 2 and len(s.s()) == 2


def test_save_load_round_trip(tmp_path, float64):
    m = dy.ParameterCollection()
    gru = dy.GRUBuilder(2, 3, 4, m, reset_bias=-1.0, layer_norm=True, learned_init=True)
    rnn = dy.SimpleRNNBuilder(1, 3, 4, m)
    _randomise(gru, np.random.RandomState(8))
    base = str(tmp_path / "rnn")
    dy.save(base, [gru, rnn])
    gru2, rnn2 = dy.load(base, dy.ParameterCollection())
    assert isinstance(gru2, dy.GRUBuilder) and gru2.reset_bias == -1.0 and gru2.layer_norm
    xs = _xs(3, 3)
    for b1, b2 in ((gru, gru2), (rnn, rnn2)):
        y1 = b1.initial_state().transduce(_inputs(xs))[-1].npvalue()
        y2 = b2.initial_state().transduce(_inputs(xs))[-1].npvalue()
        np.testing.assert_array_equal(y1, y2)
