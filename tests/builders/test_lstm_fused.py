"""The fused LSTM step (dy.lstm_step, lstm_step_dropout, lstm_step_h/_c,
lstm_step_weight) against the composition of plain operations: values and
gradients, batched and broadcast arguments, errors."""

import numpy as np
import pytest

import dyn as dy
from dyn._core.core import autobatch as _autobatch
from dyn._core.ops import rnn as _k_rnn

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


@pytest.mark.parametrize("source", ["parameter", "expression"])
@pytest.mark.parametrize("reader", [None, "after", "before"])
def test_weight_alias_read_by_other_operations(float64, source, reader):
    """An lstm_step_weight alias that another operation reads too passes that operation's
    gradient on to Wh, next to the steps' one product: the same gradient as when the other
    operation and the steps read Wh itself. The alias of a parameter has the parameter's gradient memory
    (the other reader adds straight into it); the alias of another expression its own, added
    into the expression's at the end."""
    rng = np.random.RandomState(3)
    Hw = 8
    Wp = dy.ParameterCollection().add_parameters((4 * Hw, Hw))
    Wp.set_value(rng.uniform(-0.2, 0.2, (4 * Hw, Hw)))
    Pv, Rv = rng.uniform(-1, 1, (4 * Hw, T, B)), rng.uniform(-1, 1, (4 * Hw, Hw))
    grads = []
    for via_alias, read in ((True, reader), (False, reader), (True, None)):
        dy.renew_cg()
        Wh = dy.parameter(Wp) if source == "parameter" else dy.parameter(Wp) * 1.0
        W = dy.lstm_step_weight(Wh) if via_alias else Wh    # (steps reading Wh: a rank-1 update each)
        other = None
        if read == "before":
            other = dy.sum_elems(dy.cmult(W, dy.inputTensor(Rv)))
        hs = _k_rnn.lstm_sequence(dy.inputTensor(Pv, batched=True), None, W, None, None, T, 1.0)
        if read == "after":
            other = dy.sum_elems(dy.cmult(W, dy.inputTensor(Rv)))
        loss = dy.sum_batches(dy.sum_elems(hs[-1]))
        if other is not None:
            loss = loss + other
        Wp.scale_gradient(0.0)
        loss.backward()
        grads.append(Wp.grad_as_array())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12, atol=1e-15)
    assert np.abs(grads[2]).max() > 0
    if reader is not None:      # the other reader's term is there, next to the steps' product
        np.testing.assert_allclose(grads[0] - grads[2], Rv, rtol=1e-9, atol=1e-12)


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


# ---------------------------------------------------------------- the builders' h-valued steps
# lstm_sequence makes steps whose value is h_t; c_t stays in the node's scratch, where the next
# step reads it and adds its gradient back, and lstm_state_c copies it out.


def _public_chain(P, prev, Wh, mh, mg, cols, fb):
    out, s = [], prev
    for t in cols:
        first = s is None
        s = dy.lstm_step_dropout(
            P, s, None if first else Wh, None if first else mh, mg, col=t, forget_bias=fb
        )
        out.append(s)
    return out


@pytest.mark.parametrize("bds", [(1, 1, 1), (B, B, B), (1, B, 1), (B, 1, B), (B, B, 1), (1, 1, B)])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("start", ["none", "packed"])
def test_h_valued_steps_equal_the_public_step(float64, bds, masked, start):
    """Every h and c (lstm_state_c) of a sequence and of a second one that continues from its
    step 1 (prev an h-valued step made by another call) equal the public [h; c] steps, and
    check_grad passes on a loss that reads every h and some of the c."""
    bp, bprev, bmask = bds
    P, Q = _tensor((4 * H, T), bp), _tensor((4 * H, 2), bp)
    prev = _tensor((2 * H,), bprev) if start == "packed" else None
    Wh = dy.inputTensor(RNG.uniform(-1, 1, (4 * H, H)))
    mh, mg = (_tensor((H,), bmask), _tensor((H,), bmask)) if masked else (None, None)
    W = dy.lstm_step_weight(Wh)
    hs = _k_rnn.lstm_sequence(P, prev, W, mh, mg, T, 0.5)
    hs2 = _k_rnn.lstm_sequence(Q, hs[1], W, mh, mg, 2, 0.5)
    cs = [_k_rnn.lstm_state_c(h) for h in hs + hs2]
    ref = _public_chain(P, prev, Wh, mh, mg, range(T), 0.5)
    ref += _public_chain(Q, ref[1], Wh, mh, mg, range(2), 0.5)
    for k, (h, c, r) in enumerate(zip(hs + hs2, cs, ref)):
        assert h.dim()[0] == (H,)
        np.testing.assert_allclose(
            dy.concatenate([h, c]).npvalue(), r.npvalue(), rtol=1e-12, atol=1e-14, err_msg="step %d" % k
        )
    read = hs + hs2 + [cs[0], cs[3], cs[-1]]
    n = max(bds)
    loss = dy.sum_batches(dy.esum([dy.sum_elems(dy.cmult(x, _tensor((H,), n))) for x in read]))
    assert dy.check_grad(loss) == []


@pytest.mark.parametrize("autobatching", [False, True])
def test_h_valued_steps_backward_twice(float64, autobatching):
    """A second backward pass over the same graph gives the same gradients: the c gradient a
    step receives from the next one (kept in its scratch) is consumed by each pass."""
    m = dy.ParameterCollection()
    Wx, Wh = m.add_parameters((4 * H, 2)), m.add_parameters((4 * H, H))
    dy.renew_cg(autobatching=autobatching)
    losses = []
    for n in (3, 5, 2):
        P = Wx * dy.inputTensor(RNG.uniform(-1, 1, (2, n)))
        hs = _k_rnn.lstm_sequence(P, None, dy.lstm_step_weight(Wh), None, None, n, 1.0)
        losses.append(dy.sum_elems(hs[-1]) + dy.sum_elems(_k_rnn.lstm_state_c(hs[n // 2])))
    loss = dy.esum(losses)
    got = []
    for _ in range(2):
        for p in (Wx, Wh):
            p.scale_gradient(0.0)
        loss.backward()
        got.append([Wx.grad_as_array(), Wh.grad_as_array()])
    assert np.abs(got[0][1]).max() > 0
    for a, b in zip(got[0], got[1]):
        np.testing.assert_allclose(b, a, rtol=1e-12)


def _nid(e):
    return int(repr(e).split()[1].split("/")[0])


def test_h_valued_steps_batched_with_a_constant_prev(float64):
    """Under autobatching, a step whose previous state takes no gradient (a sequence over
    constant inputs and a constant Wh, continued on trainable ones) runs in one batch with
    a step whose previous state does: gradients equal the node-by-node engine's, twice over."""
    Whv, P0 = RNG.uniform(-1, 1, (4 * H, H)), RNG.uniform(-1, 1, (4 * H, 2))
    Wxv, Xv = RNG.uniform(-1, 1, (4 * H, 2)), [RNG.uniform(-1, 1, (2, n)) for n in (3, 4)]
    res = []
    for ab in (False, True):
        m = dy.ParameterCollection()
        Wx = m.add_parameters((4 * H, 2), init=Wxv)
        dy.renew_cg(autobatching=ab)
        W = dy.lstm_step_weight(dy.inputTensor(Whv))
        h0 = _k_rnn.lstm_sequence(dy.inputTensor(P0), None, W, None, None, 2, 1.0)
        a = _k_rnn.lstm_sequence(Wx * dy.inputTensor(Xv[0]), h0[-1], W, None, None, 3, 1.0)
        b = _k_rnn.lstm_sequence(Wx * dy.inputTensor(Xv[1]), None, W, None, None, 4, 1.0)
        loss = dy.sum_elems(a[-1]) + dy.sum_elems(b[-1]) + dy.sum_elems(_k_rnn.lstm_state_c(a[0]))
        v, gs = loss.value(), []
        for _ in range(2):
            Wx.scale_gradient(0.0)
            loss.backward()
            gs.append(Wx.grad_as_array())
        np.testing.assert_allclose(gs[1], gs[0], rtol=1e-12)
        if ab:  # a's first step (prev h0[-1], no gradient) ran in one batch with a step of b
            bs = {_nid(x) for x in b}
            assert any(_nid(a[0]) in bt and bs & set(bt) for bt in _autobatch.batches())
        res.append((v, gs[0]))
    assert res[1][0] == pytest.approx(res[0][0], rel=1e-12)
    np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-10, atol=1e-13)


def test_h_valued_step_errors():
    P = dy.inputTensor(np.zeros((4 * H, T)))
    Wh = dy.inputTensor(np.zeros((4 * H, H)))
    with pytest.raises(ValueError, match="lstm_state_c: expected"):
        _k_rnn.lstm_state_c(dy.inputVector(np.zeros(H)))
    h = _k_rnn.lstm_sequence(P, None, Wh, None, None, 1, 1.0)[0]
    with pytest.raises(ValueError, match="lstm_step: prev must be an LSTM state of hidden size 4"):
        _k_rnn.lstm_sequence(
            dy.inputTensor(np.zeros((16, 1))), h, dy.inputTensor(np.zeros((16, 4))), None, None, 1, 1.0
        )


@pytest.mark.parametrize("autobatching", [False, True])
@pytest.mark.parametrize("B", [8, 13])
@pytest.mark.parametrize("dropout", [False, True])
def test_float32_wide_minibatch_backward_through_wh_transposed(device, autobatching, B, dropout):
    """float32 steps over a minibatch of 8 or more with H >= 128 take Wh^T d as a product with
    Wh's transpose, made once per backward pass in the lstm_step_weight alias's scratch: the
    gradients equal those of the product with Wh itself to float32 rounding, in a first backward
    pass and in a second one over the same graph after a trainer update changed Wh (the copy is
    remade for each pass, never read stale). The copy is made only where dyn's register kernels
    are on (AVX-512 machines); they are switched on here so that it is checked on every machine."""
    from dyn._core.cpu import blas as _cpu_blas
    from dyn._core.cpu import rnn as _cpu_rnn

    if device != "CPU":
        pytest.skip("the transposed copy is the CPU kernel's")
    In, Hw, T = 24, 128, 4

    def run(transposed):
        old = _cpu_rnn._set_wh_transposed(transposed)
        old_regs = _cpu_blas._set_skinny(True)
        made = _cpu_rnn._wh_transposes()
        try:
            rng = np.random.RandomState(5)
            m = dy.ParameterCollection()
            lstm = dy.VanillaLSTMBuilder(1, In, Hw, m)
            for p in m.parameters_list():
                p.set_value(rng.uniform(-0.3, 0.3, p.shape()))
            if dropout:
                lstm.set_dropouts(0.2, 0.3)
            trainer = dy.SimpleSGDTrainer(m, 0.5)
            dy.renew_cg(autobatching=autobatching)
            dy.reset_random_seed(11)    # the same dropout masks in both runs
            xs = [dy.inputTensor(rng.uniform(-1, 1, (In, B)), batched=True) for _ in range(T)]
            hs = lstm.initial_state().transduce(xs)
            R = [dy.inputTensor(rng.uniform(-1, 1, (Hw, B)), batched=True) for _ in range(T)]
            loss = dy.sum_batches(dy.esum([dy.dot_product(h, r) for h, r in zip(hs, R)]))
            grads = []
            for _ in range(2):
                loss.backward()
                grads.append([p.grad_as_array().copy() for p in m.parameters_list()])
                trainer.update()
            return grads, _cpu_rnn._wh_transposes() - made
        finally:
            _cpu_rnn._set_wh_transposed(old)
            _cpu_blas._set_skinny(old_regs)

    (plain, n_plain), (fast, n_fast) = run(False), run(True)
    assert n_plain == 0 and n_fast == 2     # one copy per backward pass, for the one sequence
    for gp, gf in zip(plain, fast):
        for a, b in zip(gp, gf):
            assert np.abs(a).max() > 0
            np.testing.assert_allclose(b, a, rtol=2e-4, atol=2e-5 * np.abs(a).max())


@pytest.mark.parametrize("cls", ["VanillaLSTMBuilder", "SparseLSTMBuilder", "CompactVanillaLSTMBuilder"])
@pytest.mark.parametrize("start", ["initial", "continued", "batched"])
def test_transduce_makes_the_graph_of_the_general_path(float64, cls, start):
    """transduce over one fused layer with no dropout skips the builder's per-layer bookkeeping:
    it must make the very nodes the general path makes (add_inputs' outputs), in the same order,
    with the same values and gradients; with dropout or two layers it takes the general path."""
    from dyn._core.core.graph import describe

    m = dy.ParameterCollection()
    lstm = getattr(dy, cls)(1, 3, 4, m)
    E = m.add_lookup_parameters((10, 3))
    runs = []
    for fast in (True, False):
        dy.renew_cg()
        s = lstm.initial_state()
        if start == "continued":
            s = s.add_input(E[9])
        xs = [dy.lookup_batch(E, [i, i + 1]) if start == "batched" else E[i] for i in range(5)]
        hs = s.transduce(xs) if fast else [st.output() for st in s.add_inputs(xs)]
        loss = dy.sum_batches(dy.sum_elems(dy.esum(hs)))
        v = loss.value()
        loss.backward()
        runs.append((describe(), v, [p.grad_as_array().copy() for p in m.parameters_list()]))
        for p in m.parameters_list() + m.lookup_parameters_list():
            p.scale_gradient(0.0)
    (d1, v1, g1), (d0, v0, g0) = runs
    assert d1 == d0
    assert v1 == v0
    for a, b in zip(g1, g0):
        np.testing.assert_array_equal(a, b)
    # dropout: the general path (its masks), which the fast one does not make
    lstm.set_dropouts(0.3, 0.2)
    dy.renew_cg()
    hs = lstm.initial_state().transduce([E[i] for i in range(3)])
    assert len(hs) == 3 and any(op == "random_bernoulli" for op, _, _ in describe(labels=True))
