"""Plans of repeated graphs: a graph whose nodes record the same as an earlier one's (ops,
arguments, Dims, attributes) replays the batches the agenda chose for it. Replayed graphs must
give the agenda's values and gradients bit for bit, graphs that differ only where the quick shape
hash cannot see must not be replayed, and nothing may depend on the hash being right."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dyn as dy
from dyn._core.core import autobatch as _autobatch
from dyn.graph import autobatch_stats

from .test_engine import EXAMPLES, D, Model, _example, programs


@pytest.fixture(autouse=True)
def _plan_defaults():
    _autobatch._set_plan_cache(True)
    yield
    _autobatch._set_plan_cache(True)
    _autobatch._set_plan_hash(True)
    _autobatch._set_plan_limits()


class Tagger:
    """A BiLSTM tagger's graph: lookups, two LSTMs, an MLP and a loss per word."""

    def __init__(self):
        dy.reset_random_seed(11)               # the builders' initial weights
        self.m = dy.ParameterCollection()
        rs = np.random.RandomState(4)
        self.E = self.m.lookup_parameters_from_numpy(rs.uniform(-1, 1, (20, 6)))
        self.H = self.m.parameters_from_numpy(rs.uniform(-1, 1, (5, 8)))
        self.O = self.m.parameters_from_numpy(rs.uniform(-1, 1, (3, 5)))
        self.f = dy.VanillaLSTMBuilder(1, 6, 4, self.m)
        self.b = dy.VanillaLSTMBuilder(1, 6, 4, self.m)
        self.params = [self.H, self.O]

    def loss(self, words, tags):
        we = [self.E[w] for w in words]
        f = self.f.initial_state().transduce(we)
        b = self.b.initial_state().transduce(list(reversed(we)))
        xs = [dy.concatenate([x, y]) for x, y in zip(f, reversed(b))]
        return dy.esum([dy.pickneglogsoftmax(self.O * dy.tanh(self.H * x), t) for x, t in zip(xs, tags)])

    def grads(self):
        out = [p.grad_as_array().copy() for p in self.params] + [self.E.grad_as_array().copy()]
        for b in (self.f, self.b):
            out += [p.grad_as_array().copy() for p in b.get_parameters()[0]]
        return out

    def zero(self):
        for p in self.params:
            p.write_grads(0)
        self.E.write_grads(0)
        for b in (self.f, self.b):
            for p in b.get_parameters()[0]:
                p.write_grads(0)


def _sentences():
    rs = np.random.RandomState(7)
    lengths = [3, 5, 3, 5, 3, 4, 3, 5]
    return [(list(rs.randint(20, size=n)), list(rs.randint(3, size=n))) for n in lengths]


def _run(model, sentences, autobatch=True):
    """Loss, gradients and batches of each sentence's graph, in order."""
    out = []
    for words, tags in sentences:
        model.zero()
        dy.renew_cg(autobatching=autobatch)
        loss = model.loss(words, tags)
        value = loss.value()
        loss.backward()
        out.append((value, model.grads(), _autobatch.batches() if autobatch else None))
    return out


def _equal(a, b):
    for (v0, g0, b0), (v1, g1, b1) in zip(a, b, strict=True):
        assert v1 == v0
        assert b1 == b0
        for x, y in zip(g0, g1, strict=True):
            np.testing.assert_array_equal(y, x)


def _agenda_then_plans(run, configure=lambda: None):
    """run() with the plans off (the agenda's results), then with them on after configure(): the
    two must equal bit for bit. Returns the engine's statistics of the second run."""
    _autobatch._set_plan_cache(False)
    agenda = run()
    _autobatch._set_plan_cache(True)
    configure()
    autobatch_stats(reset=True)
    _equal(agenda, run())
    return autobatch_stats()


def test_repeated_graphs_replay_the_agendas_batches_bit_for_bit():
    """Lengths 3, 5, 3, 5, 3, 4, 3, 5: a shape's plan is kept the second time it is seen and replayed
    from the third on (the 3-word graph twice, the 5-word once); every graph's loss, gradients
    and batches equal the agenda's exactly, and the engine off's to rounding."""
    model = Tagger()
    sentences = _sentences()
    _autobatch._set_plan_cache(False)
    agenda = _run(model, sentences)
    off = _run(model, sentences, autobatch=False)
    _autobatch._set_plan_cache(True)
    autobatch_stats(reset=True)
    replayed = _run(model, sentences)
    stats = autobatch_stats()
    assert stats["plan_replays"] == 3
    assert stats["plans_stored"] == 2
    assert all(len(b) > 0 for _, _, b in replayed)
    _equal(agenda, replayed)
    for (v0, g0, _), (v1, g1, _) in zip(off, replayed, strict=True):
        assert v1 == pytest.approx(v0, rel=1e-5)
        for x, y in zip(g0, g1, strict=True):
            np.testing.assert_allclose(y, x, rtol=1e-4, atol=1e-6)


def test_replays_with_the_parameters_changing_between_graphs(float64):
    """Training: the update between graphs changes values, never the plan; float64 losses of the
    run with plans equal those of the agenda's run bit for bit."""
    losses = []
    for plans in (False, True):
        _autobatch._set_plan_cache(plans)
        model = Tagger()
        trainer = dy.AdamTrainer(model.m, 0.01)
        run = []
        for words, tags in _sentences() * 3:
            dy.renew_cg(autobatching=True)
            loss = model.loss(words, tags)
            run.append(loss.value())
            loss.backward()
            trainer.update()
        losses.append(run)
    assert losses[1] == losses[0]


def _picks(ranges):
    """Six vectors' picked rows through tanh: the pick ranges decide the batches, not the shapes."""
    dy.renew_cg(autobatching=True)
    rng = np.random.RandomState(3)
    xs = [dy.inputTensor(rng.randn(8)) for _ in range(6)]
    picks = [dy.pick_range(x, *ranges[j % len(ranges)]) for j, x in enumerate(xs)]
    loss = dy.esum([dy.sum_elems(dy.tanh(p) * float(j + 1)) for j, p in enumerate(picks)])
    value = loss.value()
    loss.backward()
    return value, [x.gradient() for x in xs], sorted(len(b) for b in _autobatch.batches())


@pytest.mark.parametrize("real_hash", [True, False])
def test_graphs_that_differ_only_in_attributes_are_not_replayed(real_hash):
    """pick_range(x, 2, 5) and (3, 6) have the same Dims, so the same quick shape hash; six picks
    of one range run as one batch, of two ranges as two. Alternating the two kinds (and, with
    real_hash=False, every graph given the same hash) must never replay one's plan on the
    other."""
    _autobatch._set_plan_hash(real_hash)
    one, two = [(2, 5)], [(2, 5), (3, 6)]
    _autobatch._set_plan_cache(False)
    expect = {k: _picks(r) for k, r in (("one", one), ("two", two))}
    assert expect["one"][2] == [6, 6, 6] and expect["two"][2] == [3, 3, 6, 6]   # the picks: 6 or 3 + 3
    _autobatch._set_plan_cache(True)
    _autobatch._set_plan_hash(real_hash)
    autobatch_stats(reset=True)
    for kind in ["one", "two", "one", "one", "two", "two", "one", "two", "two", "one"]:
        value, grads, batches = _picks(one if kind == "one" else two)
        v0, g0, b0 = expect[kind]
        assert value == v0
        assert batches == b0
        for x, y in zip(g0, grads, strict=True):
            np.testing.assert_array_equal(y, x)
    assert autobatch_stats()["plan_replays"] > 0


def test_every_graph_on_one_hash_still_gets_its_own_batches():
    """With one shape hash for all graphs, a plan is stored, compared whole and replaced as the
    graphs change; tagger graphs of three lengths, interleaved, still equal the agenda's."""
    model = Tagger()
    sentences = _sentences() * 2
    _agenda_then_plans(lambda: _run(model, sentences), lambda: _autobatch._set_plan_hash(False))
    assert _autobatch._plans() == 1


def test_a_graph_computed_in_two_forwards_is_not_replayed():
    """value() in the middle of a graph, then the rest: the second forward starts past computed
    nodes, which no record covers; repeated, it still equals the agenda's run."""
    model = Tagger()
    sentences = [s for s in _sentences() if len(s[0]) == 3]

    def run():
        out = []
        for words, tags in sentences:
            model.zero()
            dy.renew_cg(autobatching=True)
            first = model.loss(words[:1], tags[:1])
            first.value()
            loss = first + model.loss(words, tags)
            value = loss.value()
            loss.backward()
            out.append((value, model.grads(), _autobatch.batches()))
        return out

    assert _agenda_then_plans(run)["plan_replays"] == len(sentences) - 2   # only the first forward's part


def test_plan_limits_drop_old_plans():
    """At most two plans kept: three shapes, each seen three times in a row, store, replay and
    drop plans as they go (the third shape's plan drops the first two), and every graph still
    equals the agenda's."""
    model = Tagger()
    rs = np.random.RandomState(1)
    lengths = [2] * 3 + [3] * 3 + [4] * 3
    sentences = [(list(rs.randint(20, size=n)), list(rs.randint(3, size=n))) for n in lengths]
    stats = _agenda_then_plans(lambda: _run(model, sentences), lambda: _autobatch._set_plan_limits(2))
    assert stats["plan_replays"] == 3
    assert stats["plan_rests"] == 0
    assert _autobatch._plans() == 1


def test_plans_that_never_replay_make_the_engine_rest():
    """Five shapes cycling with room for two plans: from the second cycle on each graph is stored
    and dropped before it comes again. The engine sees that none of the plans it drops has
    replayed and rests: the next 4 x 2 whole graphs are neither hashed nor recorded. Every graph
    still equals the agenda's."""
    model = Tagger()
    rs = np.random.RandomState(1)
    sentences = [(list(rs.randint(20, size=n)), list(rs.randint(3, size=n))) for n in [2, 3, 4, 5, 6] * 2]
    stats = _agenda_then_plans(lambda: _run(model, sentences), lambda: _autobatch._set_plan_limits(2))
    # the first cycle: first sightings; the second: the 2 and the 3 stored, the 4 finds no room
    # and starts a rest of 8 graphs, of which the 5 and the 6 are the first two
    assert stats["plan_replays"] == 0
    assert stats["plan_rests"] == 1
    assert _autobatch._plans() == 0
    assert _autobatch._plan_rest() == 6


def _shape(n):
    """A graph whose shape is set by n: tanh of n inputs, summed."""
    dy.renew_cg(autobatching=True)
    loss = dy.esum([dy.tanh(dy.inputTensor(np.full(3, 0.1 * j))) for j in range(n)])
    loss.value()


def _rests(shapes):
    """Run a graph of each shape in turn; the lengths of the rests begun along the way."""
    out = []
    for n in shapes:
        before = _autobatch._plan_rest()
        _shape(n)
        if _autobatch._plan_rest() > max(before - 1, 0):
            out.append(_autobatch._plan_rest())     # begun after this graph's forward ran
    return out


def test_rests_double_while_plans_never_replay_and_end_when_they_do():
    """Room for 16 plans: a cycle of 40 shapes thrashes (rests of 64, then 128 graphs), while
    shapes seen three times in a row replay their plans (no rest), after which a thrashing cycle
    rests 64 graphs again, not 256."""
    _autobatch._set_plan_limits(16)
    assert _rests(list(range(2, 42)) * 8) == [64, 128]
    while _autobatch._plan_rest():
        _shape(1)
    autobatch_stats(reset=True)
    assert _rests([n for n in range(50, 70) for _ in range(3)]) == []
    assert autobatch_stats()["plan_replays"] == 20
    assert _rests(list(range(2, 42)) * 3) == [64]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(progs=st.lists(programs, min_size=1, max_size=4), n=st.integers(1, 8), seed=st.integers(0, 1000))
def test_random_graphs_replayed_three_times(progs, n, seed, device):
    """The engine test's random programs, one graph of n examples built three times with other
    inputs and word indices: the third replays the plan the second stored (or, where the graph
    runs no batch, the second and third run in node order), and all three equal the agenda's
    values, gradients and batches bit for bit."""
    rs = np.random.RandomState(seed)
    reps = [
        [(progs[k % len(progs)], list(rs.randint(10, size=3)), rs.uniform(-1, 1, (3, D))) for k in range(n)]
        for _ in range(3)
    ]
    model = Model(seed)

    def run():
        out = []
        for examples in reps:
            model.zero_grads()
            dy.renew_cg(autobatching=True)
            loss = dy.esum([_example(model, *e) for e in examples])
            value = loss.value()
            loss.backward()
            out.append((value, [g.copy() for g in model.grads()], _autobatch.batches()))
        return out

    stats = _agenda_then_plans(run)
    if stats["batches"] or device != "CPU":   # the second stored its plan, the third replayed it
        assert (stats["plan_replays"], stats["plain_runs"]) == (1, 0)
    else:               # no batch, no random number (the programs draw none): the first made the
        assert (stats["plan_replays"], stats["plain_runs"]) == (0, 2)   # shape plain


def _terms(rs, weights, noise=0.0):
    """sum(tanh(W_0 x_0)) + |logistic(W_1 x_1)|^2 with x_k from rs: only the products can batch
    (when the two weights are one). With noise > 0 the first product goes through dropout."""
    h0 = weights[0] * dy.inputTensor(rs.randn(3))
    h1 = weights[1] * dy.inputTensor(rs.randn(3))
    if noise:
        h0 = dy.dropout(h0, noise)
    return dy.sum_elems(dy.tanh(h0)) + dy.squared_norm(dy.logistic(h1))


def _chain(seed, weights, noise=0.0):
    """_terms' graph from seed: its value, the weights' gradients and the batches."""
    dy.renew_cg(autobatching=True)
    loss = _terms(np.random.RandomState(seed), weights, noise)
    value = loss.value()
    loss.backward()
    return value, [W.grad_as_array().copy() for W in weights], sorted(len(b) for b in _autobatch.batches())


def _weights(n):
    m = dy.ParameterCollection()
    rs = np.random.RandomState(5)
    return m, [m.parameters_from_numpy(rs.uniform(-1, 1, (4, 3))) for _ in range(n)]


def _zero(weights):
    for W in weights:
        W.write_grads(0)


def test_graphs_that_run_no_batch_run_in_node_order(device):
    """Two products with two weights, then unlike ops, batch nothing: on the CPU the first graph
    makes its shape plain and the next four run in node order without the agenda (on a device,
    whose random draws the engine cannot see, the second stores a plan and the rest replay it);
    all five equal the engine off's values and gradients bit for bit."""
    _, (W1, W2) = _weights(2)
    off = []
    for seed in range(5):
        _zero([W1, W2])
        dy.renew_cg(autobatching=False)
        loss = _terms(np.random.RandomState(seed), [W1, W2])
        value = loss.value()
        loss.backward()
        off.append((value, [W1.grad_as_array().copy(), W2.grad_as_array().copy()]))
    autobatch_stats(reset=True)
    for seed in range(5):
        _zero([W1, W2])
        value, grads, batches = _chain(seed, [W1, W2])
        assert batches == []
        assert value == off[seed][0]
        for x, y in zip(off[seed][1], grads, strict=True):
            np.testing.assert_array_equal(y, x)
    stats = autobatch_stats()
    if device == "CPU":
        assert (stats["plain_runs"], stats["plan_replays"], stats["plain_shapes"]) == (4, 0, 1)
    else:
        assert (stats["plain_runs"], stats["plan_replays"], stats["plain_shapes"]) == (0, 3, 0)


def test_a_plain_shape_is_the_graph_s_alone(device):
    """W1 x and W2 y batch nothing and make their shape plain; W1 x and W1 y, the same ops on one
    parameter node instead of two, batch their two products. The plain shape is the first
    graph's alone: the second is not run in node order, its products still batch and its
    values equal the agenda's."""
    _, (W1, W2) = _weights(2)
    _autobatch._set_plan_cache(False)
    _zero([W1, W2])
    expect = _chain(0, [W1, W1])
    _autobatch._set_plan_cache(True)
    for _ in range(3):
        _zero([W1, W2])
        assert _chain(0, [W1, W2])[2] == []
    assert _autobatch._plain_shapes() == (1 if device == "CPU" else 0)
    for _ in range(3):
        _zero([W1, W2])
        value, grads, batches = _chain(0, [W1, W1])
        assert batches == expect[2] == [2]
        assert value == expect[0]
        np.testing.assert_array_equal(grads[0], expect[1][0])


def test_graphs_that_draw_random_numbers_are_never_plain():
    """Dropout draws its mask from the graph's generator in the order the nodes run: a graph that
    batches nothing but draws is not made plain (the agenda's order, replayed, keeps the draws
    where the engine put them), and its runs equal the agenda's bit for bit."""
    _, (W1, W2) = _weights(2)

    def run():
        dy.reset_random_seed(3)
        out = []
        for seed in range(4):
            _zero([W1, W2])
            out.append(_chain(seed, [W1, W2], noise=0.5))
        return out

    stats = _agenda_then_plans(run)
    assert stats["plain_runs"] == 0
    assert stats["plain_shapes"] == 0
    assert stats["plan_replays"] == 2


def test_no_shape_is_plain_when_every_graph_shares_one_hash():
    """With one hash for every graph the hash cannot tell a plain graph from a batching one:
    no shape is made plain, the stored plans (compared whole) decide."""
    _autobatch._set_plan_hash(False)
    _, (W1, W2) = _weights(2)
    for weights in ([W1, W2], [W1, W2], [W1, W1], [W1, W1], [W1, W2]):
        _zero([W1, W2])
        batches = _chain(0, weights)[2]
        assert batches == ([2] if weights[1] is W1 else [])
    assert _autobatch._plain_shapes() == 0
