"""Every trainer's update against a float64 numpy reference of its equations:
dense Parameters, and lookup tables updated sparsely (exact catch-up) or densely,
with and without weight decay, and with coupled L2."""

import numpy as np
import pytest

import dyn as dy
from tests.trainers._reference import RULES, Rule

STEPS = 12


def _train(name, sparse, wd=0.0, l2=0.0, steps=STEPS, read_at=(4,)):
    """Train W (3x4) and E (6 rows of 3) on a linear loss whose gradients are
    known (X_t for W, Y_t[r] for the touched rows r of E); return the trainer's
    and the reference's values after `steps` updates."""
    rule, kwargs, consts, lr = RULES[name]
    rng = np.random.RandomState(1)
    w0, e0 = rng.uniform(0.2, 1.0, (3, 4)), rng.uniform(0.2, 1.0, (6, 3))
    m = dy.ParameterCollection()
    if wd:
        m.set_weight_decay(wd)
    W = m.add_parameters((3, 4), init=w0)
    E = m.add_lookup_parameters((6, 3), init=e0)
    t = getattr(dy, name)(m, **kwargs)
    t.set_clip_threshold(-1)
    t.set_sparse_updates(sparse)
    if l2:
        t.set_l2(l2)
    ref_w, ref_e = Rule(rule, wd=wd, l2=l2, **consts), Rule(rule, wd=wd, l2=l2, rows=True, **consts)
    w, e = w0.copy(), e0.copy()
    for step in range(1, steps + 1):
        X = rng.randn(3, 4)
        rows = rng.choice(6, 2, replace=False) if step % 3 else [5]  # rows 0-4 sit idle at times
        ge = np.zeros((6, 3))
        dy.renew_cg()
        loss = dy.sum_elems(dy.cmult(W, dy.inputTensor(X)))
        for r in rows:
            ge[r] = rng.randn(3)
            loss = loss + dy.dot_product(E[int(r)], dy.inputVector(list(ge[r])))
        loss.backward()
        t.update()
        w, e = ref_w.step(w, X, step, lr), ref_e.step(e, ge, step, lr)
        if step in read_at:  # a read in between brings idle rows up to date
            np.testing.assert_allclose(
                E.as_array(), e, rtol=1e-9 if dy.get_precision() == "float64" else 1e-5
            )
    return (W.as_array(), E.as_array()), (w, e)


@pytest.mark.parametrize("name", sorted(RULES))
@pytest.mark.parametrize("sparse", [True, False])
@pytest.mark.parametrize("wd", [0.0, 0.05])
def test_rule_matches_numpy_reference(float64, name, sparse, wd):
    (W, E), (w, e) = _train(name, sparse, wd)
    np.testing.assert_allclose(W, w, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(E, e, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    "name", ["AdamTrainer", "AmsgradTrainer", "RMSPropTrainer", "AdagradTrainer", "SMORMS3Trainer"]
)
def test_coupled_l2_goes_through_the_rule(float64, name):
    """set_l2: g + l2 * w enters the rule (exact for dense steps)."""
    (W, E), (w, e) = _train(name, sparse=False, l2=0.1)
    np.testing.assert_allclose(W, w, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(E, e, rtol=1e-9, atol=1e-12)


def test_float32_matches_reference_to_float32_precision():
    for name in RULES:
        (W, E), (w, e) = _train(name, sparse=True, wd=0.05)
        assert np.max(np.abs(E - e)) <= 1e-5 * np.max(np.abs(e)), name
        assert np.max(np.abs(W - w)) <= 1e-5 * np.max(np.abs(w)), name


def test_constructor_defaults_are_dynets():
    m = dy.ParameterCollection()
    assert dy.SimpleSGDTrainer(m).learning_rate == pytest.approx(0.1)
    assert dy.MomentumSGDTrainer(m).learning_rate == pytest.approx(0.01)
    assert dy.AdagradTrainer(m).learning_rate == pytest.approx(0.1)
    assert dy.AdadeltaTrainer(m).learning_rate == 1.0
    assert dy.RMSPropTrainer(m).learning_rate == pytest.approx(0.001)
    assert dy.AdamTrainer(m).learning_rate == pytest.approx(0.001)
    assert dy.AdamTrainer(m, 0.05).learning_rate == pytest.approx(0.05)  # alpha positional
    assert dy.AmsgradTrainer(m).learning_rate == pytest.approx(0.001)
    assert dy.EGTrainer(m).learning_rate == pytest.approx(0.1)
    assert dy.SMORMS3Trainer(m).learning_rate == pytest.approx(0.001)
    assert dy.CyclicalSGDTrainer(m).learning_rate == pytest.approx(0.01)
    assert dy.SimpleSGDTrainer(m, e0=0.3).learning_rate == pytest.approx(0.3)
    with pytest.raises(TypeError):
        dy.Trainer(m, 0.1)
    assert dy.AdamTrainer(m).whoami() == "AdamTrainer"


def test_cyclical_learning_rate_schedule():
    m = dy.ParameterCollection()
    p = m.add_parameters((1,), init=0.0)
    t = dy.CyclicalSGDTrainer(m, learning_rate_min=0.01, learning_rate_max=0.1, step_size=4, gamma=0.99)
    seen = []
    for _ in range(10):
        seen.append(t.learning_rate)
        dy.renew_cg()
        dy.sum_elems(p).backward()
        t.update()
    want = [0.01]
    for it in range(9):
        cycle = np.floor(1 + it / 8)
        x = abs(it / 4 - 2 * cycle + 1)
        want.append(0.01 + 0.09 * max(0.0, 1 - x) * 0.99**it)
    np.testing.assert_allclose(seen, want, rtol=1e-12)
    # SGD with the rate of each step: p = -sum(lr)
    np.testing.assert_allclose(p.as_array(), [-sum(seen)], rtol=1e-5)


def test_eg_keeps_rows_on_the_simplex():
    m = dy.ParameterCollection()
    E = m.add_lookup_parameters((4, 3), init=np.full((4, 3), 1 / 3))
    P = m.add_parameters((2, 2), init=np.full((2, 2), 0.25))
    t = dy.EGTrainer(m, learning_rate=0.5)
    t.enableCyclicalLR(0.1, 0.5, 2, 1.0)
    for i in range(5):
        dy.renew_cg()
        loss = dy.dot_product(E[i % 2], dy.inputVector([1.0, -1.0, 0.5])) + dy.sum_elems(
            dy.cmult(P, dy.inputTensor(np.eye(2)))
        )
        loss.backward()
        t.update()
    np.testing.assert_allclose(E.as_array().sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(P.as_array().sum(), 1.0, rtol=1e-5)
    assert E.as_array()[0, 1] > E.as_array()[0, 0]  # moved against the gradient
