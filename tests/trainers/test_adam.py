"""AdamTrainer against a numpy reference of its equations."""

import numpy as np
import pytest

import dyn as dy


def _adam_reference(theta, grads, lr=0.01, b1=0.9, b2=0.999, eps=1e-8):
    m = np.zeros_like(theta)
    v = np.zeros_like(theta)
    for t, g in enumerate(grads, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        theta = theta - lr * np.sqrt(1 - b2**t) / (1 - b1**t) * m / (np.sqrt(v) + eps)
    return theta


def _train_against_reference(w0, x, steps, rtol, atol):
    """Adam (lr 0.01, no clipping) on |W x|^2 from W = w0; after every step W equals the numpy
    reference. Returns the model and W."""
    m = dy.ParameterCollection()
    W = m.add_parameters(w0.shape, init=w0)
    t = dy.AdamTrainer(m, alpha=0.01)
    t.set_clip_threshold(-1)
    theta, grads = w0.copy(), []
    for _ in range(steps):
        dy.renew_cg()
        dy.squared_norm(W * dy.inputVector(x)).backward()
        grads.append(2 * np.outer(theta @ x, x))  # d|Wx|^2/dW at the current theta
        t.update()
        theta = _adam_reference(w0, grads, lr=0.01)
        np.testing.assert_allclose(W.as_array(), theta, rtol=rtol, atol=atol)
    return m, W


def test_adam_matches_reference(float64):
    rng = np.random.RandomState(0)
    w0 = rng.randn(3, 4)
    x = rng.randn(4)
    _train_against_reference(w0, x, 5, rtol=1e-10, atol=1e-12)


def test_adam_updates_idle_lookup_rows_exactly(float64):
    """Moments move rows with zero gradient too: the lazy catch-up keeps that exact."""
    m = dy.ParameterCollection()
    E = m.add_lookup_parameters((3, 2), init=np.ones((3, 2)))
    t = dy.AdamTrainer(m, alpha=0.1)
    dy.sum_elems(E[0]).backward()
    t.update()
    dy.renew_cg()
    dy.sum_elems(E[1]).backward()
    t.update()
    g1 = np.array([[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]])
    g2 = np.array([[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    np.testing.assert_allclose(E.as_array(), _adam_reference(np.ones((3, 2)), [g1, g2], lr=0.1), rtol=1e-12)
    assert not E.grad_as_array().any() and len(E.touched_rows()) == 0


def test_adam_learns_xor():
    m = dy.ParameterCollection()
    W = m.add_parameters((8, 2))
    b = m.add_parameters(8)
    V = m.add_parameters((1, 8))
    t = dy.AdamTrainer(m, alpha=0.05)
    data = [((0, 0), 0), ((0, 1), 1), ((1, 0), 1), ((1, 1), 0)]
    for _ in range(300):
        for x, y in data:
            dy.renew_cg()
            p = dy.logistic(V * dy.tanh(W * dy.inputVector(x) + b))
            dy.squared_distance(p, dy.inputVector([y])).backward()
            t.update()
    dy.renew_cg()
    preds = [dy.logistic(V * dy.tanh(W * dy.inputVector(x) + b)).scalar_value() for x, _ in data]
    assert [round(p) for p in preds] == [y for _, y in data]


def test_adam_float32_matches_reference():
    """float32 steps run a separate vectorised loop (dyn/_core/cpu/_fastopt.h)."""
    rng = np.random.RandomState(2)
    w0, x = rng.randn(40, 30).astype(np.float32).astype(np.float64), rng.randn(30)
    _, W = _train_against_reference(w0, x, 20, rtol=2e-4, atol=2e-5)
    assert not W.grad_as_array().any()


def test_adam_dense_lookup_step_matches_reference():
    """A dense float32 step runs the untouched rows through a loop that never reads
    the gradient (dyn/_core/cpu/_fastopt.h): every row must still move as dense Adam says."""
    rng = np.random.RandomState(3)
    e0 = rng.randn(40, 8).astype(np.float32).astype(np.float64)
    m = dy.ParameterCollection()
    E = m.add_lookup_parameters((40, 8), init=e0)
    t = dy.AdamTrainer(m, alpha=0.01)
    t.set_clip_threshold(-1)
    t.set_sparse_updates(False)
    grads = []
    for step in range(12):
        rows = [int(r) for r in rng.choice(40, 3, replace=False)] + [39 if step % 2 else 0]
        dy.renew_cg()
        dy.sum_elems(dy.esum([E[r] for r in rows])).backward()
        g = np.zeros((40, 8))
        for r in rows:
            g[r] += 1.0
        grads.append(g)
        t.update()
        np.testing.assert_allclose(E.as_array(), _adam_reference(e0, grads, lr=0.01), rtol=1e-5, atol=1e-6)
    assert not E.grad_as_array().any() and len(E.touched_rows()) == 0


def test_optimizer_flushes_denormal_moments_and_restores_fp_mode():
    """Moments decayed into the denormal range are flushed to zero inside the step
    (they cost x86 a microcode assist each); the caller's floating-point mode is
    left as it was."""
    m = dy.ParameterCollection()
    E = m.add_lookup_parameters((4, 3), init=np.ones((4, 3)))
    t = dy.AdamTrainer(m, alpha=0.01)
    t.set_sparse_updates(False)
    dy.sum_elems(E[0]).backward()
    t.update()
    state = t.state_dict()
    tiny = np.finfo(np.float32).tiny
    state["/_0#m"] = np.full(12, tiny * 1.05, np.float32)  # one more decay step is denormal
    t.load_state_dict(state)
    w_before = E.as_array().copy()
    dy.renew_cg()
    dy.sum_elems(E[1]).backward()
    t.update()
    mom = t.state_dict()["/_0#m"].reshape(4, 3)
    assert (mom[[0, 2, 3]] == 0).all()  # idle rows: 0.9 * 1.05 * tiny flushed
    assert (mom[1] > 0.09).all()  # the touched row took its gradient
    np.testing.assert_array_equal(E.as_array()[[0, 2, 3]], w_before[[0, 2, 3]])
    # numpy arithmetic after the step still produces denormals (mode restored)
    assert np.float32(tiny) / np.float32(4) != 0


@pytest.mark.parametrize("decay", [0.0, 1e-3])
def test_dense_step_of_still_rows_is_bitwise_the_full_step(decay):
    """Untouched elements whose first moment is zero (rows never used, or idle until it was
    flushed) skip the square root and the division of the dense step in stretches of 64
    (dyn/_core/cpu/_fastopt.h): weights and both moments equal the full step's bit for bit, with
    DyNet's weight decay too, a tail past the last stretch, and a non-finite weight among them
    (without L2 regularisation its gradient has no 0 w term: its moments stay zero)."""
    from dyn._core.cpu import optim
    out = []
    for still in (True, False):
        old = optim._set_adam_still(still)
        try:
            rng = np.random.RandomState(5)
            m = dy.ParameterCollection()
            m.set_weight_decay(decay)
            e0 = rng.randn(301, 16)
            e0[200, 3] = np.inf
            E = m.add_lookup_parameters((301, 16), init=e0)
            t = dy.AdamTrainer(m, alpha=0.01)
            t.set_clip_threshold(-1)
            t.set_sparse_updates(False)
            for step in range(6):
                rows = [int(r) for r in rng.choice(40, 3, replace=False)]   # rows 40-300 stay still
                dy.renew_cg()
                dy.sum_elems(dy.esum([E[r] for r in rows])).backward()
                t.update()
                if step == 2:   # rows 40-99 as if used long ago: v > 0, m flushed to zero
                    state = t.state_dict()
                    v = state["/_0#v"].reshape(301, 16)
                    v[40:100] = rng.uniform(0.01, 1.0, (60, 16))
                    t.load_state_dict(state)
            out.append((E.as_array().copy(), {k: np.array(v).copy() for k, v in t.state_dict().items()
                                              if isinstance(v, np.ndarray)}))
        finally:
            optim._set_adam_still(old)
    (e_on, s_on), (e_off, s_off) = out
    np.testing.assert_array_equal(e_on, e_off)
    assert set(s_on) == set(s_off) and len(s_on) >= 2
    for k in s_off:
        np.testing.assert_array_equal(s_on[k], s_off[k])
    mom = s_on["/_0#m"].reshape(301, 16)
    assert (mom[40:200] == 0).all() and (mom[:40] != 0).any()
    assert mom[200, 3] == 0 and np.isinf(e_on[200, 3])
    assert (s_on["/_0#v"].reshape(301, 16)[40:100] > 0).all()
    assert (e_on[50] != e0[50].astype(np.float32)).any() == (decay > 0)


@pytest.mark.parametrize("decay,clip", [(0.0, -1.0), (1e-3, -1.0), (0.0, 0.05)])
def test_dense_step_of_unread_weights_is_bitwise_the_full_step(decay, clip):
    """A dense parameter's elements whose gradient and first moment are zero (the rows of W that
    nothing reads: here the bottom half of W x is never used) skip the square root and the
    division of the step in stretches of 64 (dyn/_core/cpu/_fastopt.h, dyn_adam_f32): weights,
    both moments and the gradient equal the full step's bit for bit, with DyNet's weight decay,
    with clipping, with a tail past the last stretch, with a non-finite weight among them, and
    with elements whose v is nonzero (as if read long ago, their first moment flushed to zero)."""
    from dyn._core.cpu import optim
    out = []
    for still in (True, False):
        old = optim._set_adam_still(still)
        try:
            rng = np.random.RandomState(7)
            m = dy.ParameterCollection()
            m.set_weight_decay(decay)
            w0 = rng.randn(200, 13)
            w0[150, 4] = np.inf                       # never read: stays inf, its moments zero
            W = m.add_parameters((200, 13), init=w0)
            t = dy.AdamTrainer(m, alpha=0.01)
            t.set_clip_threshold(clip)
            for step in range(6):
                dy.renew_cg()
                x = dy.inputVector(rng.randn(13))
                dy.squared_norm(dy.pick_range(dy.parameter(W) * x, 0, 100)).backward()
                t.update()
                if step == 2:   # rows 100-179 as if read long ago: v > 0, m flushed to zero
                    state = t.state_dict()
                    v = state["/_0#v"].reshape(13, 200).T     # (column-major, as the weights)
                    v[100:180] = rng.uniform(0.01, 1.0, (80, 13))
                    state["/_0#v"] = v.T.reshape(-1)
                    t.load_state_dict(state)
            state = {k: np.array(v).copy() for k, v in t.state_dict().items() if isinstance(v, np.ndarray)}
            out.append((W.as_array().copy(), W.grad_as_array().copy(), state))
        finally:
            optim._set_adam_still(old)
    (w_on, g_on, s_on), (w_off, g_off, s_off) = out
    np.testing.assert_array_equal(w_on, w_off)
    np.testing.assert_array_equal(g_on, g_off)
    assert set(s_on) == set(s_off) and len(s_on) >= 2
    for k in s_off:
        np.testing.assert_array_equal(s_on[k], s_off[k])
    mom = s_on["/_0#m"].reshape(13, 200).T
    v = s_on["/_0#v"].reshape(13, 200).T
    assert (mom[100:] == 0).all() and (mom[:100] != 0).all()
    assert (v[100:180] > 0).all() and (v[180:] == 0).all()
    assert np.isinf(w_on[150, 4])
    assert (w_on[100:140] != w0[100:140].astype(np.float32)).any() == (decay > 0)
