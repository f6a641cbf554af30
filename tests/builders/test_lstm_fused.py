"""The fused LSTM step (dy.lstm_step, lstm_step_dropout, lstm_step_h/_c,
lstm_step_weight) against the composition of plain operations: values and
gradients, batched and broadcast arguments, errors."""

import numpy as np
import pytest

import dyn as dy

H, T, B = 3, 4, 2
RNG = np.random.RandomState(20)


def _composed(P, prev, Wh, t, fb, mask_h=None, mask_g=None):
    """The same step from plain operations: returns [h; c]."""
    p = dy.pick(P, t, 1)
    if prev is not None:
        h, c = dy.pick_range(prev, 0, H), dy.pick_range(prev, H, 2 * H)
        p = dy.affine_transform([p, Wh, h if mask_h is None else dy.cmult(h, mask_h)])
    i = dy.logistic(dy.pick_range(p, 0, H))
    f = dy.logistic(dy.pick_range(p, H, 2 * H) + fb)
    o = dy.logistic(dy.pick_range(p, 2 * H, 3 * H))
    g = dy.tanh(dy.pick_range(p, 3 * H, 4 * H))
    if mask_g is not None:
        g = dy.cmult(g, mask_g)
    cn = dy.cmult(i, g) if prev is None else dy.cmult(i, g) + dy.cmult(f, c)
    return dy.concatenate([dy.cmult(o, dy.tanh(cn)), cn])


def _tensor(shape, bd):
    a = RNG.uniform(-1, 1, shape + ((bd,) if bd > 1 else ()))
    return dy.inputTensor(a, batched=bd > 1)


@pytest.mark.parametrize("bds", [(1, 1, 1), (B, B, B), (1, B, 1), (B, 1, B), (B, B, 1), (1, 1, B)])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("collector", [False, True])
def test_fused_step_equals_composition(float64, bds, masked, collector):
    bp, bprev, bmask = bds
    P, prev = _tensor((4 * H, T), bp), _tensor((2 * H,), bprev)
    Wh = dy.inputTensor(RNG.uniform(-1, 1, (4 * H, H)))
    mh, mg = (_tensor((H,), bmask), _tensor((H,), bmask)) if masked else (None, None)
    W = dy.lstm_step_weight(Wh) if collector else Wh
    # two steps, so the second reads the first's value
    s1 = dy.lstm_step_dropout(P, prev, W, mh, mg, col=1, forget_bias=0.5)
    s2 = dy.lstm_step_dropout(P, s1, W, mh, mg, col=3, forget_bias=0.5)
    fused = dy.concatenate([dy.lstm_step_h(s2), dy.lstm_step_c(s2)])
    c1 = _composed(P, prev, Wh, 1, 0.5, mh, mg)
    comp = _composed(P, c1, Wh, 3, 0.5, mh, mg)
    np.testing.assert_allclose(fused.npvalue(), comp.npvalue(), rtol=1e-12, atol=1e-14)
    R = _tensor((2 * H,), max(bds))
    loss = dy.sum_batches(dy.sum_elems(dy.cmult(fused, R)))
    assert dy.check_grad(loss) == []


def test_first_step_and_float32_fast_paths():
    """No previous state; float32 (vectorised nonlinearities) close to float64."""
    P = dy.inputTensor(RNG.uniform(-1, 1, (4 * H, 1)))
    s = dy.lstm_step(P, None, None)
    want = _composed(P, None, None, 0, 1.0)
    np.testing.assert_allclose(s.npvalue(), want.npvalue(), rtol=1e-5, atol=1e-6)
    big = 64
    Pb = dy.inputTensor(RNG.uniform(-2, 2, (4 * big, 3)))
    Whb = dy.inputTensor(RNG.uniform(-0.3, 0.3, (4 * big, big)))
    s = dy.lstm_step(Pb, dy.lstm_step(Pb, None, None, col=0), Whb, col=2)
    assert np.all(np.isfinite(s.npvalue())) and np.abs(s.npvalue()[:big]).max() < 1


def test_weight_collector_sums_every_live_step(float64):
    """lstm_step_weight's one product equals the per-step rank-1 updates,
    also with batched steps, a step that is off the loss's path and a second
    sequence sharing the collector."""
    Wp = dy.ParameterCollection().add_parameters((4 * H, H))
    Pv = RNG.uniform(-1, 1, (4 * H, T, B))
    grads = []
    for collect in (False, True):
        dy.renew_cg()
        W = dy.lstm_step_weight(Wp) if collect else Wp
        P = dy.inputTensor(Pv, batched=True)
        s = dy.lstm_step(P, None, None, col=0)
        outs = []
        for t in range(1, T):
            s = dy.lstm_step(P, s, W, col=t)
            outs.append(dy.lstm_step_h(s))
        dy.lstm_step(P, s, W, col=0)  # not on the loss's path
        other = dy.lstm_step(dy.pick_batch_elem(P, 1), dy.pick_batch_elem(s, 0), W, col=2)  # a second user
        loss = dy.sum_batches(dy.sum_elems(dy.esum(outs))) + dy.sum_elems(other)
        Wp.scale_gradient(0.0)
        loss.backward()
        grads.append(Wp.grad_as_array())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)


def test_errors_name_the_op_and_leave_the_graph_usable(float64):
    P = dy.inputTensor(np.zeros((4 * H, T)))
    prev = dy.inputVector(np.zeros(2 * H))
    Wh = dy.inputTensor(np.zeros((4 * H, H)))
    with pytest.raises(ValueError, match="lstm_step: p must be"):
        dy.lstm_step(dy.inputVector(np.zeros(5)), None, None)
    with pytest.raises(IndexError, match="lstm_step: column 4"):
        dy.lstm_step(P, None, None, col=T)
    with pytest.raises(ValueError, match="prev must be"):
        dy.lstm_step(P, dy.inputVector(np.zeros(H)), Wh)
    with pytest.raises(ValueError, match="Wh must be"):
        dy.lstm_step(P, prev, dy.inputTensor(np.zeros((4 * H, H + 1))))
    with pytest.raises(ValueError, match="both None"):
        dy.lstm_step(P, prev, None)
    with pytest.raises(ValueError, match="mask_h"):
        dy.lstm_step_dropout(P, prev, Wh, dy.inputVector(np.zeros(H + 1)), None)
    with pytest.raises(ValueError, match="batch sizes differ"):
        dy.lstm_step(_tensor((4 * H, T), 2), _tensor((2 * H,), 3), Wh)
    with pytest.raises(TypeError):
        dy.lstm_step(P, None, None, col=1.5)
    with pytest.raises(ValueError, match="lstm_step_h"):
        dy.lstm_step_h(dy.inputVector(np.zeros(5)))
    with pytest.raises(ValueError, match="lstm_step_weight"):
        dy.lstm_step_weight(dy.inputTensor(np.zeros((5, 2))))
    s = dy.lstm_step(P, prev, Wh, col=2)
    assert s.dim() == ((2 * H,), 1) and np.all(np.isfinite(s.npvalue()))
