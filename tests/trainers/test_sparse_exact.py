"""Exact sparse updates: a model with embeddings trained with sparse lookup
updates ends where dense updates take it, for every rule whose state moves
on a zero gradient; idle rows are caught up by every read path."""

import numpy as np
import pytest

import dyn as dy
from tests.trainers._reference import RULES, STATEFUL, Rule

VOCAB, STEPS = 200, 400


def _max_rel(a, b):
    """Elementwise relative difference, values near 0 measured against 1e-3 of the largest."""
    return float(np.max(np.abs(a - b) / (np.abs(b) + 1e-3 * np.max(np.abs(b)))))


def _tagger(name, sparse, exact=True, wd=0.0, steps=STEPS, changes=False):
    """A small classifier over summed embeddings (Zipf-distributed words, so
    most rows sit idle for long stretches); returns (E, W, b) after training."""
    _, kwargs, _, _ = RULES[name]
    rng = np.random.RandomState(0)
    m = dy.ParameterCollection()
    if wd:
        m.set_weight_decay(wd)
    E = m.add_lookup_parameters((VOCAB, 8), init=rng.uniform(0.1, 1.0, (VOCAB, 8)))
    W = m.add_parameters((5, 8), init=rng.uniform(0.1, 1.0, (5, 8)))
    b = m.add_parameters(5, init=rng.uniform(0.1, 1.0, 5))
    t = getattr(dy, name)(m, **kwargs)
    t.set_sparse_updates(sparse, exact=exact)
    p = np.arange(1, VOCAB + 1.0) ** -1.1
    p /= p.sum()
    for i in range(steps):
        if changes and i == steps // 3:
            t.learning_rate = t.learning_rate * 0.5
            m.set_weight_decay(0.02)
        if changes and i == 2 * steps // 3:
            E.as_array()  # every row current: the schedule is pruned to its last segment
        dy.renew_cg()
        words = rng.choice(VOCAB, 3, p=p)
        h = dy.tanh(dy.esum([E[int(w)] for w in words]))
        loss = dy.pickneglogsoftmax(W * h + b, int(rng.randint(5)))
        loss.backward()
        if changes and i % 7 == 3:
            t.update_subset([0, 1], [])  # the table sits this step out
        else:
            t.update()
    return E.as_array(), W.as_array(), b.as_array()


@pytest.mark.parametrize("name", STATEFUL + ["SimpleSGDTrainer", "AdagradTrainer"])
@pytest.mark.parametrize("wd", [0.0, 0.01])
def test_sparse_updates_equal_dense_updates(name, wd):
    """float64: sparse and dense agree to ~1e-12. float32: both round at every
    step and training amplifies it, so sparse float32 is measured against the
    float64 run and must be as close to it as dense float32 is."""
    dy.set_precision("float64")
    try:
        exact = _tagger(name, False, wd=wd)
        rel64 = max(_max_rel(s, d) for s, d in zip(_tagger(name, True, wd=wd), exact))
        dy.set_precision("float32")
        sparse32, dense32 = _tagger(name, True, wd=wd), _tagger(name, False, wd=wd)
    finally:
        dy.set_precision("float32")
    rel32 = max(_max_rel(s, d) for s, d in zip(sparse32, dense32))
    err_sparse = max(_max_rel(s, d) for s, d in zip(sparse32, exact))
    err_dense = max(_max_rel(s, d) for s, d in zip(dense32, exact))
    print(
        "sparse vs dense %s wd=%g: max relative difference float64 %.1e, float32 %.1e "
        "(float32 vs float64: sparse %.1e, dense %.1e)" % (name, wd, rel64, rel32, err_sparse, err_dense)
    )
    assert rel64 < 1e-9
    assert rel32 < 1e-3
    assert err_sparse < 3 * err_dense + 1e-6


@pytest.mark.parametrize("name", ["MomentumSGDTrainer", "AdamTrainer", "AmsgradTrainer", "SMORMS3Trainer"])
def test_exact_through_learning_rate_decay_and_subset_changes(float64, name):
    """The catch-up follows changes of learning rate and weight decay, and
    steps a table sat out (update_subset)."""
    sparse, dense = _tagger(name, True, changes=True), _tagger(name, False, changes=True)
    rel = max(_max_rel(s, d) for s, d in zip(sparse, dense))
    print("with schedule changes, %s: max relative difference %.2e" % (name, rel))
    assert rel < 1e-9


def test_dynet_approximation_is_still_available(float64):
    exact, approx, dense = (
        _tagger("AdamTrainer", True, steps=100),
        _tagger("AdamTrainer", True, exact=False, steps=100),
        _tagger("AdamTrainer", False, steps=100),
    )
    assert _max_rel(exact[0], dense[0]) < 1e-9
    assert _max_rel(approx[0], dense[0]) > 1e-3
    # approximate = each row steps with its own frozen moments when touched
    rng = np.random.RandomState(0)
    m = dy.ParameterCollection()
    E = m.add_lookup_parameters((3, 2), init=np.ones((3, 2)))
    t = dy.AdamTrainer(m, alpha=0.1)
    t.set_sparse_updates(True, exact=False)
    refs, vals, counts = [Rule("adam") for _ in range(3)], [np.ones(2) for _ in range(3)], [0, 0, 0]
    for step in range(1, 9):
        r = [0, 1, 0, 0, 2, 1, 0, 1][step - 1]
        g = rng.randn(2)
        dy.renew_cg()
        dy.dot_product(E[r], dy.inputVector(list(g))).backward()
        t.update()
        vals[r] = refs[r].step(vals[r], g, step, 0.1)  # bias correction uses the global step
    np.testing.assert_allclose(E.as_array(), np.array(vals), rtol=1e-12)
    del counts


def _idle_model(name, sparse, gen, steps, **kw):
    m = dy.ParameterCollection()
    E = m.add_lookup_parameters((3, 6), init=np.full((3, 6), 0.5))
    t = getattr(dy, name)(m, **kw)
    t.set_clip_threshold(-1)
    t.set_sparse_updates(sparse)
    for step in range(steps):
        rows = gen(step)
        dy.renew_cg()
        loss = dy.zeros(1)
        for r, g in rows:
            loss = loss + dy.dot_product(E[r], dy.inputVector(list(g)))
        loss.backward()
        t.update()
    return E


def _regime_gradients():
    """Gradients from 1e-12 to 10 (sqrt(v) below, near and far above eps) for row 0
    every step and row 1 after idle stretches of 1, 25, 269 and 350 steps
    (shorter and longer than K); returns gen(step) and the numpy reference table
    after 700 steps."""
    scales = 10.0 ** np.array([-12, -9, -8, -7, -3, 1])
    rng = np.random.RandomState(3)
    grads = {s: rng.randn(6) * scales for s in range(700)}

    def gen(step):
        out = [(0, grads[step])]
        if step in (0, 5, 30, 31, 300, 650):
            out.append((1, grads[step][::-1]))
        return out

    ref, e = Rule("adam"), np.full((3, 6), 0.5)
    for step in range(700):
        g = np.zeros((3, 6))
        for r, gr in gen(step):
            g[r] = gr
        e = ref.step(e, g, step + 1, 0.01)
    return gen, e


def test_adam_catch_up_every_regime_and_long_idle(float64):
    """Each branch of the catch-up (two series and the replay) against the
    numpy reference."""
    gen, e = _regime_gradients()
    E = _idle_model("AdamTrainer", True, gen, 700, alpha=0.01)
    np.testing.assert_allclose(E.as_array(), e, rtol=1e-9, atol=1e-14)


def test_adam_catch_up_every_regime_float32():
    """float32 rows take the vectorised catch-up (dyn/_core/cpu/_fastopt.h): the same idle
    stretches and gradient scales (both series and the replay) as above, sparse
    against dense float32 and both against the float64 reference."""
    gen, e = _regime_gradients()
    sparse = _idle_model("AdamTrainer", True, gen, 700, alpha=0.01).as_array()
    dense = _idle_model("AdamTrainer", False, gen, 700, alpha=0.01).as_array()
    np.testing.assert_allclose(sparse, e, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(sparse, dense, rtol=2e-5, atol=1e-6)
    assert (sparse[1] != 0.5).all()  # row 1 moved in every element, tiny gradients too


def test_smorms3_long_idle_row(float64):
    """SMORMS3's state after more than 512 idle steps (ODE continuation)."""
    rng = np.random.RandomState(4)
    grads = rng.randn(1502, 6)

    def gen(step):
        return [(0, grads[step])] + ([(1, grads[step + 1])] if step in (0, 1400) else [])

    sparse = _idle_model("SMORMS3Trainer", True, gen, 1402, learning_rate=0.01).as_array()
    dense = _idle_model("SMORMS3Trainer", False, gen, 1402, learning_rate=0.01).as_array()
    rel = _max_rel(sparse, dense)
    print("SMORMS3 after a 1400-step idle stretch: max relative difference %.2e" % rel)
    assert rel < 1e-7


def test_every_read_path_sees_caught_up_rows(float64):
    def gen(step):
        return [(0, [1.0] * 6)] + ([(1, [-1.0] * 6)] if step == 0 else [])

    dense = _idle_model("MomentumSGDTrainer", False, gen, 20).as_array()
    reads = [
        lambda E: E[1].npvalue(),
        lambda E: E.batch([2, 1]).npvalue()[:, 1],
        lambda E: dy.parameter(E).npvalue()[:, 1],
        lambda E: E.npvalue()[:, 1],
        lambda E: E.row_as_array(1),
        lambda E: E.rows_as_array([1])[0],
        lambda E: E.as_array()[1],
    ]
    for read in reads:
        E = _idle_model("MomentumSGDTrainer", True, gen, 20)
        dy.renew_cg()
        np.testing.assert_allclose(read(E), dense[1], rtol=1e-12)
        np.testing.assert_allclose(E.as_array(), dense, rtol=1e-12)
    # a lookup re-pointed with set() reads its new row up to date
    E = _idle_model("MomentumSGDTrainer", True, gen, 20)
    dy.renew_cg()
    x = E[2]
    x.set(1)
    np.testing.assert_allclose(x.npvalue(), dense[1], rtol=1e-12)


@pytest.mark.parametrize("name,rule", [("AdamTrainer", "adam"), ("AmsgradTrainer", "amsgrad")])
def test_adam_closed_forms_once_bias_correction_saturates(float64, name, rule):
    """With beta_2 = 0.6 the bias correction is 1.0 from step ~80 on, where
    the catch-up sums become closed geometric forms; checked with weight
    decay and a learning-rate change, against the numpy reference."""
    scales = 10.0 ** np.array([-12, -9, -8, -7, -3, 1])
    rng = np.random.RandomState(5)
    grads = rng.randn(300, 3, 6) * scales
    touch = {1: {0, 100, 101, 250, 299}, 2: {0, 200}}
    m = dy.ParameterCollection()
    m.set_weight_decay(0.01)
    E = m.add_lookup_parameters((3, 6), init=np.full((3, 6), 0.5))
    t = getattr(dy, name)(m, alpha=0.05, beta_1=0.5, beta_2=0.6)
    t.set_clip_threshold(-1)
    ref, e = Rule(rule, beta_1=0.5, beta_2=0.6, wd=0.01), np.full((3, 6), 0.5)
    for step in range(300):
        lr = 0.05 if step < 150 else 0.02
        t.learning_rate = lr
        g = np.zeros((3, 6))
        g[0] = grads[step, 0]
        dy.renew_cg()
        loss = dy.dot_product(E[0], dy.inputVector(list(g[0])))
        for r in (1, 2):
            if step in touch[r]:
                g[r] = grads[step, r]
                loss = loss + dy.dot_product(E[r], dy.inputVector(list(g[r])))
        loss.backward()
        t.update()
        e = ref.step(e, g, step + 1, lr)
    np.testing.assert_allclose(E.as_array(), e, rtol=1e-9, atol=1e-14)


@pytest.mark.parametrize("name", ["AdamTrainer", "MomentumSGDTrainer"])
def test_static_graph_reuse_reads_caught_up_rows(float64, name):
    """A graph built once and recomputed with set() (DyNet's static style)
    reads rows that no gradient touches (a constant lookup) while weight
    decay moves every row each step: sparse must still equal dense."""

    def train(sparse):
        m = dy.ParameterCollection()
        m.set_weight_decay(0.05)
        E = m.add_lookup_parameters((4, 3), init=np.arange(12.0).reshape(4, 3) / 10)
        t = getattr(dy, name)(m)
        t.set_sparse_updates(sparse)
        dy.renew_cg()
        x = dy.inputVector([1.0, -1.0, 0.5])
        loss = dy.squared_norm(dy.cmult(E[0], x) + dy.lookup(E, 2, update=False))
        seen = []
        for step in range(30):
            x.set([1.0, -1.0 + 0.1 * step, 0.5])
            seen.append(loss.scalar_value())
            loss.backward()
            t.update()
        return np.array(seen), E.as_array()

    (seen_sparse, e_sparse), (seen_dense, e_dense) = train(True), train(False)
    assert _max_rel(seen_sparse, seen_dense) < 1e-10  # every recomputed value agrees
    assert _max_rel(e_sparse, e_dense) < 1e-10


@pytest.mark.parametrize("name", ["AdamTrainer", "MomentumSGDTrainer"])
def test_deferred_catch_up_is_bitwise_the_immediate_one(name):
    """Lookups note their idle rows as pending and the next forward pass catches them up (their
    memory fetched towards the caches meanwhile): tables, optimizer state and losses are bit for bit
    those of catching each row up as it is looked up, in float32, with rows idle for 1 to
    hundreds of steps, repeated rows and lookup_batch."""
    from dyn._core.train import catchup

    out = []
    for deferred in (True, False):
        old = catchup._set_deferred(deferred)
        try:
            rng = np.random.RandomState(3)
            m = dy.ParameterCollection()
            E = m.add_lookup_parameters((VOCAB, 8), init=rng.uniform(-1.0, 1.0, (VOCAB, 8)))
            W = m.add_parameters((5, 8), init=rng.uniform(-1.0, 1.0, (5, 8)))
            t = getattr(dy, name)(m)
            t.set_sparse_updates(True)
            p = np.arange(1, VOCAB + 1.0) ** -1.1
            p /= p.sum()
            losses = []
            for _ in range(300):
                dy.renew_cg()
                words = [int(w) for w in rng.choice(VOCAB, 4, p=p)]
                h = dy.esum([E[w] for w in words[:3]] + [dy.sum_batches(E.batch(words[2:]))])
                loss = dy.pickneglogsoftmax(dy.parameter(W) * dy.tanh(h), int(rng.randint(5)))
                losses.append(loss.value())
                loss.backward()
                t.update()
            state = {k: np.array(v) for k, v in t.state_dict().items() if isinstance(v, np.ndarray)}
            out.append((E.as_array(), W.as_array(), np.array(losses), state))
        finally:
            catchup._set_deferred(old)
    (e1, w1, l1, s1), (e0, w0, l0, s0) = out
    np.testing.assert_array_equal(e1, e0)
    np.testing.assert_array_equal(w1, w0)
    np.testing.assert_array_equal(l1, l0)
    assert set(s1) == set(s0)
    for k in s0:
        np.testing.assert_array_equal(s1[k], s0[k])


def test_pending_rows_are_caught_up_before_any_read():
    """A lookup leaves its idle row pending (not yet caught up); the next forward pass, a read of the
    whole table and the table's own step each bring pending rows up to date first, so that no value
    is ever read from a stale row (checked against catching up at once)."""
    from dyn._core.train import catchup

    def model():
        m = dy.ParameterCollection()
        E = m.add_lookup_parameters((10, 4), init=np.arange(40.0).reshape(10, 4) / 40)
        t = dy.AdamTrainer(m, alpha=0.05)
        t.set_sparse_updates(True)
        for _ in range(5):               # rows 1 and 2 take steps, then sit idle
            dy.renew_cg()
            dy.sum_elems(dy.esum([E[1], E[2]])).backward()
            t.update()
        for _ in range(7):               # only row 0 moves
            dy.renew_cg()
            dy.sum_elems(E[0]).backward()
            t.update()
        return E, t

    E, t = model()
    old = catchup._set_deferred(False)
    try:
        dy.renew_cg()
        want = E[1].npvalue(), E[2].npvalue()
    finally:
        catchup._set_deferred(old)
    # a forward pass
    E, t = model()
    dy.renew_cg()
    x = E[1]
    assert catchup._pending_rows() == {E.name(): [1]}
    np.testing.assert_array_equal(x.npvalue(), want[0])
    assert catchup._pending_rows() == {}
    # the whole table read
    E, t = model()
    dy.renew_cg()
    E[2]
    assert catchup._pending_rows() == {E.name(): [2]}
    np.testing.assert_array_equal(E.as_array()[2], want[1])
    assert catchup._pending_rows() == {}
    # the table's step, with no forward pass in between: rows 1 and 2 current before row 1 steps
    E, t = model()
    dy.renew_cg()
    E[1], E[2]
    E2, t2 = model()
    old = catchup._set_deferred(False)
    try:
        dy.renew_cg()
        E2[1], E2[2]
    finally:
        catchup._set_deferred(old)
    for table, trainer in ((E, t), (E2, t2)):
        dy.renew_cg()
        dy.sum_elems(table[1]).backward()
        trainer.update()
    assert catchup._pending_rows() == {}
    np.testing.assert_array_equal(E.as_array(), E2.as_array())
