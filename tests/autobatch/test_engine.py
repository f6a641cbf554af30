"""The autobatching engine itself: randomised graphs (hypothesis), the ways to
switch it on, value() in the middle of a graph, incremental forwards,
cg_checkpoint/cg_revert, check_validity, dropout inside batches, contiguous
outputs read in place, and the statistics it reports."""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dyn as dy
from dyn import _config
from dyn._core.core import autobatch as _autobatch
from dyn._core.core import expr as _expr
from dyn._core.core import graph as _graph
from dyn.graph import autobatch_stats

EXAMPLES = int(os.environ.get("DYN_HYPOTHESIS_EXAMPLES", "15"))
D = 4


class Model:
    def __init__(self, seed=0):
        rs = np.random.RandomState(seed)
        self.m = dy.ParameterCollection()
        self.W = self.m.parameters_from_numpy(rs.uniform(-1, 1, (D, D)))
        self.W2 = self.m.parameters_from_numpy(rs.uniform(-1, 1, (D, 2 * D)))
        self.b = self.m.parameters_from_numpy(rs.uniform(-1, 1, D))
        self.E = self.m.lookup_parameters_from_numpy(rs.uniform(-1, 1, (10, D)))

    def grads(self):
        return [p.grad_as_array() for p in (self.W, self.W2, self.b)] + [self.E.grad_as_array()]

    def zero_grads(self):
        for p in (self.W, self.W2, self.b):
            p.write_grads(0)
        self.E.write_grads(0)


# one example: a small random program over a pool of expressions
OPS = ["tanh", "logistic", "add", "cmult", "matmul", "affine", "concat_mm", "bias", "scale", "pick", "square"]


def _example(model, prog, leaves, rng_vals):
    pool = []
    for k, w in enumerate(leaves):
        if k % 2:
            pool.append(model.E[w])
        else:
            pool.append(dy.inputVector(list(rng_vals[k])))
    for op, i, j in prog:
        a, b = pool[i % len(pool)], pool[j % len(pool)]
        if op == "tanh":
            y = dy.tanh(a)
        elif op == "logistic":
            y = dy.logistic(a)
        elif op == "add":
            y = a + b
        elif op == "cmult":
            y = dy.cmult(a, b)
        elif op == "matmul":
            y = model.W * a
        elif op == "affine":
            y = dy.affine_transform([model.b, model.W, a])
        elif op == "concat_mm":
            y = model.W2 * dy.concatenate([a, b])
        elif op == "bias":
            y = a + model.b
        elif op == "scale":
            y = a * 0.5 + 1.0
        elif op == "pick":
            y = dy.ones((D,)) * dy.pickneglogsoftmax(a, i % D)
        else:
            y = dy.square(a)
        pool.append(y)
    return dy.sum_elems(dy.esum(pool[len(leaves) :])) if len(pool) > len(leaves) else dy.sum_elems(pool[0])


programs = st.lists(
    st.tuples(st.sampled_from(OPS), st.integers(0, 30), st.integers(0, 30)), min_size=1, max_size=8
)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    progs=st.lists(programs, min_size=1, max_size=4),
    n=st.integers(1, 12),
    mid=st.integers(-1, 11),
    seed=st.integers(0, 1000),
)
def test_random_graphs(progs, n, mid, seed):
    """Examples drawn from a few random programs (so alike nodes exist), with
    a value() asked for in the middle: autobatched == node by node, float32."""
    rs = np.random.RandomState(seed)
    examples = [
        (progs[k % len(progs)], list(rs.randint(10, size=3)), rs.uniform(-1, 1, (3, D))) for k in range(n)
    ]
    model = Model(seed)
    out = []
    for ab in (False, True):
        model.zero_grads()
        dy.renew_cg(autobatching=ab)
        losses = []
        for k, (prog, leaves, vals) in enumerate(examples):
            losses.append(_example(model, prog, leaves, vals))
            if k == mid:
                losses[-1].value()
        loss = dy.esum(losses)
        out.append((loss.value(), [x.value() for x in losses], None))
        loss.backward()
        out[-1] = out[-1][:2] + (model.grads(),)
    (l0, v0, g0), (l1, v1, g1) = out
    np.testing.assert_allclose(l1, l0, rtol=2e-5, atol=1e-5)
    np.testing.assert_allclose(v1, v0, rtol=2e-5, atol=1e-5)
    for a, b in zip(g0, g1):
        np.testing.assert_allclose(b, a, rtol=2e-4, atol=1e-5)


def _assert_same(off, on):
    """Node by node (off) against autobatched (on), each (loss, arrays): the loss to 1e-6
    relative, every array (gradients, values) to float32 precision."""
    assert off[0] == pytest.approx(on[0], rel=1e-6)
    for x, y in zip(off[1], on[1], strict=True):
        np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-6)


def _mlp_graph(model, n):
    losses = []
    for k in range(n):
        h = dy.tanh(model.W * model.E[k % 10] + model.b)
        losses.append(dy.pickneglogsoftmax(h, k % D))
    return losses


def test_switches():
    """renew_cg(autobatching=...), dyn.init(autobatch=...), and the default."""
    model = Model()
    old = _config.state["autobatch"]
    try:
        dy.renew_cg(autobatching=True)
        assert _graph.autobatching()
        dy.renew_cg(autobatching=False)
        assert not _graph.autobatching()
        dy.init(autobatch=True)
        assert _graph.autobatching()  # the current graph too
        dy.renew_cg()
        assert _graph.autobatching()
        dy.esum(_mlp_graph(model, 5)).value()
        assert _autobatch.batches()
        dy.init(autobatch=False)
        dy.renew_cg()
        assert not _graph.autobatching()
    finally:
        _config.state["autobatch"] = old
        dy.renew_cg()


def test_flag_from_command_line(tmp_path):
    import subprocess
    import sys

    code = "import dyn as dy; from dyn._core.core import graph; dy.renew_cg(); print(graph.autobatching())"
    out = subprocess.run(
        [sys.executable, "-c", code, "--dynet-autobatch", "1"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "True"


def test_batches_are_formed_and_outputs_are_contiguous():
    model = Model()
    dy.renew_cg(autobatching=True)
    losses = _mlp_graph(model, 6)
    dy.esum(losses).value()
    batches = _autobatch.batches()
    sizes = sorted(len(b) for b in batches)
    assert sizes.count(6) >= 4  # matmul, +b, tanh, pickneglogsoftmax: one batch each
    # the members' values are slices of one block, in member order
    desc = _graph.describe()
    for b in batches:
        ptrs = [_autobatch._value_address(i) for i in b]
        size = np.prod(desc[b[0]][2][0]) * desc[b[0]][2][1] * 4
        assert all(q - p == size for p, q in zip(ptrs, ptrs[1:]))


def test_incremental_forward_and_gradient_of_members():
    """value() on part of the graph, more nodes, backward over everything;
    gradient() of a node inside a batch is its slice."""
    model = Model()
    res = []
    for ab in (False, True):
        model.zero_grads()
        dy.renew_cg(autobatching=ab)
        a = _mlp_graph(model, 3)
        first = dy.esum(a).value()
        b = _mlp_graph(model, 4)
        loss = dy.esum(a + b)
        loss.backward(full=True)
        res.append((first, loss.value(), [x.gradient() for x in a + b], model.grads()))
    assert res[0][0] == pytest.approx(res[1][0], rel=1e-6)
    _assert_same((res[0][1], res[0][2] + res[0][3]), (res[1][1], res[1][2] + res[1][3]))


def test_checkpoint_revert():
    model = Model()
    res = []
    for ab in (False, True):
        model.zero_grads()
        dy.renew_cg(autobatching=ab)
        keep = _mlp_graph(model, 3)
        dy.cg_checkpoint()
        drop = _mlp_graph(model, 3)
        dy.esum(keep + drop).value()  # batches mix kept and dropped nodes
        dy.cg_revert()
        more = _mlp_graph(model, 2)
        loss = dy.esum(keep + more)
        loss.backward()
        res.append((loss.value(), model.grads()))
    _assert_same(res[0][:2], res[1][:2])


def test_check_validity_names_a_member():
    dy.renew_cg(autobatching=True, check_validity=True)
    xs = [dy.inputVector([1.0, -1.0]) for _ in range(3)]
    ys = [dy.log(x) for x in xs]
    with pytest.raises(RuntimeError, match="NaN or Inf"):
        dy.esum(ys).value()


def test_dropout_inside_a_batch():
    """Each member of a batched dropout gets its own mask; values and
    gradients are consistent with it."""
    dy.renew_cg(autobatching=True)
    xs = [dy.inputVector(list(np.arange(1.0, 201.0))) for _ in range(4)]
    ys = [dy.dropout(x, 0.5) for x in xs]
    loss = dy.esum([dy.sum_elems(y) for y in ys])
    loss.backward(full=True)
    assert any(len(b) == 4 for b in _autobatch.batches())
    masks = []
    for x, y in zip(xs, ys):
        v, g = y.npvalue(), x.gradient()
        kept = v != 0
        np.testing.assert_allclose(v[kept], 2 * np.arange(1.0, 201.0)[kept], rtol=1e-6)
        np.testing.assert_allclose(g, 2.0 * kept)
        assert 60 < kept.sum() < 140
        masks.append(kept)
    assert not all((masks[0] == m).all() for m in masks[1:])


def test_stats():
    model = Model()
    autobatch_stats(reset=True)
    dy.renew_cg(autobatching=True)
    loss = dy.esum(_mlp_graph(model, 8))
    loss.backward()
    s = autobatch_stats(reset=True)
    assert s["forward_calls"] == 1 and s["nodes"] == _graph.num_nodes()
    assert s["batched_nodes"] + s["singles"] == s["nodes"] and s["batches"] >= 4
    assert 0 < s["schedule_s"] <= s["forward_s"] + s["backward_s"]
    # kernel time is counted in cheap ticks and converted by the clock over the same span: each
    # phase's scheduling share lies within that phase's time
    assert 0 <= s["forward_schedule_s"] <= s["forward_s"] and 0 <= s["backward_schedule_s"] <= s["backward_s"]
    assert s["schedule_s"] == pytest.approx(s["forward_schedule_s"] + s["backward_schedule_s"])
    assert autobatch_stats()["nodes"] == 0


def test_stats_kernel_time_counted_from_the_first_call():
    """The engine reads its tick counter around kernels only once autobatch_stats has been
    called (each reading costs time of its own): in a fresh process the first call reports the
    counts and the engine's whole time but no scheduling seconds yet; after it, both."""
    import subprocess
    import sys

    code = (
        "import dyn as dy, numpy as np\n"
        "m = dy.ParameterCollection(); W = m.add_parameters((8, 8))\n"
        "def run():\n"
        "    dy.renew_cg(autobatching=True)\n"
        "    xs = [dy.inputVector(np.ones(8)) for _ in range(30)]\n"
        "    dy.esum([dy.sum_elems(dy.tanh(W * x)) for x in xs]).backward()\n"
        "run(); a = dy.graph.autobatch_stats(reset=True)\n"
        "run(); b = dy.graph.autobatch_stats()\n"
        "print(a['nodes'] > 0, a['forward_s'] > 0, a['schedule_s'] == 0.0, b['schedule_s'] > 0,\n"
        "      b['forward_schedule_s'] <= b['forward_s'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True"] * 5


def test_stats_kernel_time_is_measured():
    """A graph whose time is all in one big batched product: scheduling is a small share of it
    (the ticks-to-seconds conversion would show a wrong scale here)."""
    model = dy.ParameterCollection()
    W = model.add_parameters((600, 600))
    dy.renew_cg(autobatching=True)
    autobatch_stats(reset=True)
    xs = [dy.inputVector(np.ones(600)) for _ in range(200)]
    loss = dy.esum([dy.sum_elems(W * x) for x in xs])
    loss.value()
    s = autobatch_stats(reset=True)
    assert s["batches"] >= 1 and s["forward_s"] > 0
    assert s["forward_schedule_s"] < 0.9 * s["forward_s"]


def test_set_and_invalidate():
    """Static-graph reuse: inputs changed with set() recompute through the engine."""
    model = Model()
    dy.renew_cg(autobatching=True)
    xs = [dy.inputVector([0.1 * k] * D) for k in range(4)]
    for x in xs:
        x.settable = True
    ys = [dy.sum_elems(dy.tanh(model.W * x)) for x in xs]
    loss = dy.esum(ys)
    before = loss.value()
    xs[0].set([1.0] * D)
    after = loss.value()
    want = sum(float(np.tanh(model.W.as_array() @ np.full(D, v)).sum()) for v in (1.0, 0.1, 0.2, 0.3))
    assert after == pytest.approx(want, rel=1e-5) and after != before


def _cat_graph(model, n, row):
    ys = [dy.tanh(model.W * model.E[row + k]) for k in range(n)]  # adjacent rows: read in place
    # argument 0 in reverse order: the batched concatenate's members are not adjacent
    cs = [dy.concatenate([ys[n - 1 - k], ys[k]]) for k in range(n)]
    return [dy.sum_elems(dy.tanh(model.W2 * c)) for c in cs]


def test_scattered_arguments_are_read_per_member():
    """A batched concatenate reads non-adjacent arguments through per-member
    pointers (nothing gathered) and adds their gradients in place, also when
    cg_revert dropped some members of the batch."""
    model = Model()
    res = []
    for ab in (False, True):
        model.zero_grads()
        dy.renew_cg(autobatching=ab)
        autobatch_stats(reset=True)
        keep = _cat_graph(model, 4, 0)
        dy.cg_checkpoint()
        drop = _cat_graph(model, 3, 4)
        dy.esum(keep + drop).value()  # one concatenate batch of 7, 3 of them dropped below
        dy.cg_revert()
        loss = dy.esum(keep + _cat_graph(model, 2, 7))
        loss.backward()
        res.append((loss.value(), model.grads(), autobatch_stats()))
    s = res[1][2]
    assert s["args_per_member"] >= 2 and s["args_gathered"] == 0 and s["gathered_bytes"] == 0
    _assert_same(res[0][:2], res[1][:2])


def test_members_are_grouped_by_their_consumers():
    """One batch makes values that two different batches read (per example: x1 feeds an affine
    transform, x2 a product with another matrix; created interleaved). The first batch lays its
    members out grouped by their consumers' signature, so both consumer batches read their
    arguments in place: nothing is gathered (in id order both would gather), and values and
    gradients are those of the unbatched graph."""
    model = Model()
    n = 5
    res = []
    for ab in (False, True):
        model.zero_grads()
        dy.renew_cg(autobatching=ab)
        autobatch_stats(reset=True)
        Wt = dy.transpose(dy.parameter(model.W))
        losses = []
        for k in range(n):
            x1 = dy.tanh(model.E[k])  # the x1s and x2s of every example: one tanh batch
            x2 = dy.tanh(model.E[k + n])
            y1 = dy.affine_transform([model.b, model.W, x1])
            y2 = Wt * x2
            losses += [dy.sum_elems(y1), dy.pickneglogsoftmax(y2, k % D)]
        loss = dy.esum(losses)
        v = loss.value()
        loss.backward()
        res.append((v, model.grads(), autobatch_stats(), _autobatch.batches() if ab else None))
    s, batches = res[1][2], res[1][3]
    assert any(len(b) == 2 * n for b in batches), batches  # the x1s and x2s ran as one batch
    assert s["args_gathered"] == 0 and s["gathered_bytes"] == 0, s
    _assert_same(res[0][:2], res[1][:2])


def test_lstm_steps_with_dropped_batch_members():
    """The builders' LSTM steps (c_t in the step's scratch, read per member by the next step)
    when cg_revert dropped some members of their batches: the kept sequences' loss and
    gradients are those of the unbatched graph."""
    model = Model()
    res = []
    for ab in (False, True):
        model.zero_grads()
        m = dy.ParameterCollection()
        lstm = dy.VanillaLSTMBuilder(1, D, 3, m)
        rs = np.random.RandomState(1)
        for p in m.parameters_list():
            p.set_value(rs.uniform(-0.5, 0.5, size=p.shape()))

        def seqs(lengths, start):
            out = []
            for k, n in enumerate(lengths):
                st = lstm.initial_state().add_inputs([model.E[(start + k + t) % 10] for t in range(n)])
                out.append(dy.sum_elems(st[-1].output()) + dy.sum_elems(st[n // 2].s()[0]))
            return out

        dy.renew_cg(autobatching=ab)
        keep = seqs([3, 5, 2], 0)
        dy.cg_checkpoint()
        drop = seqs([4, 5], 3)
        dy.esum(keep + drop).value()  # step batches mix kept and dropped sequences
        dy.cg_revert()
        loss = dy.esum(keep + seqs([2, 4], 5))
        loss.backward()
        grads = [p.grad_as_array() for p in m.parameters_list()]
        res.append((loss.value(), model.grads() + grads, _autobatch.batches() if ab else None))
    assert any(-1 in b for b in res[1][2])  # a batch lost members to cg_revert
    _assert_same(res[0][:2], res[1][:2])


@pytest.mark.parametrize("gather", [True, False])
def test_batched_lstm_steps_leave_their_weight_gradient_to_the_alias(device, gather):
    """The builders' steps read Wh through an lstm_step_weight alias; batched across sequences,
    a batch leaves its dWh columns to that alias, whose backward (after every batch's) makes one
    product of them and the single steps'. The gradients equal the unbatched graph's in a full
    backward, in a backward from one sequence's loss (the other sequences' batches not live), and
    in a second backward of the same graph (no column of the first pass is taken twice). gather
    False: the alias's path when the memory for that one product cannot be had (one product per
    step and per batch, in place), which must give the same gradients, not drop them."""
    from dyn._core.cpu import outerq

    old_gather = outerq._set_gather(True)
    try:
        want = _alias_gradients_match_unbatched(device)
        outerq._set_gather(gather)
        got = _alias_gradients_match_unbatched(device)
    finally:
        outerq._set_gather(old_gather)
    _assert_same(want, got)     # (the unbatched graph takes that path too: compare with gathering)


def _alias_gradients_match_unbatched(device):
    from dyn._core.cpu import rnn as _rnn

    res = []
    for ab in (False, True):
        m = dy.ParameterCollection()
        fwd = dy.VanillaLSTMBuilder(1, D, 5, m)
        bwd = dy.VanillaLSTMBuilder(1, D, 5, m)
        E = m.lookup_parameters_from_numpy(np.random.RandomState(2).uniform(-1, 1, (10, D)))
        rs = np.random.RandomState(1)
        for p in m.parameters_list():
            p.set_value(rs.uniform(-0.5, 0.5, size=p.shape()))
        dy.renew_cg(autobatching=ab)
        f0, b0 = fwd.initial_state(), bwd.initial_state()
        losses = []
        for k, n in enumerate((3, 6, 4, 6, 1)):      # character LSTMs of a sentence's words
            xs = [E[(k + t) % 10] for t in range(n)]
            h = dy.concatenate([f0.transduce(xs)[-1], b0.transduce(xs[::-1])[-1]])
            losses.append(dy.sum_elems(dy.tanh(h)) * (k + 1))
        total = dy.esum(losses)
        total.value()
        out = []
        _rnn._deferred_columns(reset=True)
        for loss in (total, losses[1], total):
            for p in m.parameters_list():
                p.write_grads(0)
            E.write_grads(0)
            loss.backward()
            out += [p.grad_as_array() for p in m.parameters_list()] + [E.grad_as_array()]
        res.append((total.value(), out, _rnn._deferred_columns()))
    assert res[0][2] == 0                       # nothing batched, nothing deferred
    if device == "CPU":
        assert res[1][2] > 0                     # the batches' columns went to the alias
    _assert_same(res[0][:2], res[1][:2])
    return res[1][:2]


def test_dropped_members_sink_is_zeroed_and_large_enough(device, monkeypatch):
    """The sink that takes the gradients (and the aux) of batch members cg_revert dropped: on the
    GPU stand-in, with every new device block filled with signalling NaNs (np.empty gives whatever
    was there), the LSTM steps above must add only into zeroed memory of the right size. A sink
    sized from a dropped member's argument id (a node made after the revert, of another size) was
    too small for the step's aux, and the kernel went past it."""
    if device != "GPU:0" or os.environ.get("DYN_GPU_STANDIN") != "1":
        pytest.skip("poisons the GPU stand-in's memory")
    from dyn._core.gpu import backend

    alloc = backend.StandIn.alloc

    def poisoned(self, nbytes):
        p = alloc(self, nbytes)
        raw = self.blocks[p]
        raw[: len(raw) // 4 * 4].view(np.uint32)[:] = 0x7FA00000   # a float32 signalling NaN
        return p

    _graph.use_device("CPU")
    monkeypatch.setattr(backend.StandIn, "alloc", poisoned)
    _graph.use_device("GPU:0")      # new arenas, poisoned
    test_lstm_steps_with_dropped_batch_members()


def _picks_graph(ab, ranges, per_batch=False):
    """Tanh of picked rows of 6 instances' own vectors (ranges cycle through the instances)."""
    dy.renew_cg(autobatching=ab)
    rng = np.random.RandomState(3)
    xs = [dy.inputTensor(rng.randn(8, 2)) for _ in range(6)]
    if per_batch:
        picks = [dy.pick_batch(dy.concatenate_to_batch([x, x]), [1, 0]) for x in xs]
    else:
        picks = [dy.pick_range(x, *ranges[j % len(ranges)]) for j, x in enumerate(xs)]
    loss = dy.sum_batches(dy.esum([dy.sum_elems(dy.tanh(p) * float(j + 1)) for j, p in enumerate(picks)]))
    value = loss.value()
    loss.backward()
    ids = {_expr.node_of(p) for p in picks}
    ran = [set(b) & ids for b in _autobatch.batches()] if ab else []
    return value, [x.gradient() for x in xs], [p.npvalue() for p in picks], [r for r in ran if r]


@pytest.mark.parametrize(
    "ranges, together", [([(2, 5)], [6]), ([(2, 5), (0, 3)], [3, 3]), ([(1, 2, 1)], [6])]
)
def test_selections_of_the_same_slices_run_as_one(ranges, together, float64):
    v0, g0, p0, _ = _picks_graph(False, ranges)
    v1, g1, p1, batched = _picks_graph(True, ranges)
    np.testing.assert_allclose(v1, v0, rtol=1e-12)
    for a, b in zip(g0 + p0, g1 + p1):
        np.testing.assert_allclose(b, a, rtol=1e-12)
    assert sorted(len(b) for b in batched) == together  # one batch per distinct slice


def test_per_batch_element_picks_run_alone(float64):
    v0, g0, _, _ = _picks_graph(False, None, per_batch=True)
    v1, g1, _, batched = _picks_graph(True, None, per_batch=True)
    np.testing.assert_allclose(v1, v0, rtol=1e-12)
    for a, b in zip(g0, g1):
        np.testing.assert_allclose(b, a, rtol=1e-12)
    assert batched == []


def test_graph_without_batches_gets_the_plain_executors_gradients_bit_for_bit():
    """Where nothing runs batched, backward goes down the node ids as the plain executor does: a
    parameter that four consumers read (two that cannot batch run first in the engine's order)
    sums their gradient terms in the same order, so float32 gradients equal those with the engine
    off exactly. (Walked in the engine's execution order, 36 of 50 seeds differed in the last
    bits.)"""

    def grads(autobatch, seed):
        rng = np.random.RandomState(seed)
        m = dy.ParameterCollection()
        P = m.add_parameters(40, init=rng.randn(40) * 10.0 ** rng.randint(-3, 4, 40))
        rv = [list(rng.randn(40) * 10.0 ** rng.randint(-3, 4, 40)) for _ in range(4)]
        dy.renew_cg(autobatching=autobatch)
        r = [dy.inputVector(v) for v in rv]
        p = dy.parameter(P)
        cs = [dy.cumsum(p, 0), dy.tanh(p), dy.pow(p, dy.scalarInput(3.0)), dy.cmult(p, p)]
        loss = dy.esum([dy.dot_product(cs[0], r[0]), dy.squared_distance(cs[1], r[1]),
                        dy.sum_elems(dy.cmult(cs[2], r[2])), dy.mean_elems(cs[3] - r[3])])
        loss.backward()
        assert not autobatch or _autobatch.batches() == []
        return P.grad_as_array().copy()

    for seed in range(20):
        assert np.array_equal(grads(False, seed), grads(True, seed)), seed
