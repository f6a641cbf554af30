"""Every builder, with and without automatic batching: one graph holds the
per-example computations of several examples of different sizes (sequences
of different lengths, trees of different shapes), exactly as a DyNet user
writes them; the loss and the gradient of every parameter must equal those of
the node-by-node engine (float64, to rounding), and the engine must really
have formed batches."""

import numpy as np
import pytest

import dyn as dy
from dyn._core.core import autobatch as _autobatch
from dyn._core.core import graph as _graph

V, D, H = 12, 6, 5  # vocabulary, input size, hidden size


def _grads(m):
    out = [p.grad_as_array() for p in m.parameters_list()]
    out += [p.grad_as_array() for p in m.lookup_parameters_list()]
    return out


def _compare(make, run, seed=0, min_batched=0.3):
    """make(model) -> builders; run(builders, E, rng) -> list of per-example losses."""
    results = []
    for ab in (False, True):
        m = dy.ParameterCollection()
        np.random.seed(seed)
        E = m.add_lookup_parameters((V, D), init=np.random.RandomState(seed).randn(V, D))
        b = make(m)
        # deterministic parameters whatever the initialisers drew
        rs = np.random.RandomState(seed + 1)
        for p in m.parameters_list():
            p.set_value(rs.uniform(-0.5, 0.5, size=p.shape()))
        dy.renew_cg(autobatching=ab)
        _graph.seed(5)  # the same dropout masks in both engines
        losses = run(b, E, np.random.RandomState(seed + 2))
        loss = dy.esum(losses)
        v = loss.value()
        loss.backward()
        stats = _autobatch.batches() if ab else None
        results.append((v, _grads(m), stats, dy.cg().memory_stats()["nodes"]))
    (v0, g0, _, n), (v1, g1, batches, _) = results
    np.testing.assert_allclose(v1, v0, rtol=1e-9, err_msg="loss")
    for k, (a, b) in enumerate(zip(g0, g1)):
        np.testing.assert_allclose(b, a, rtol=1e-8, atol=1e-11, err_msg="gradient of parameter %d" % k)
    batched = sum(len(b) for b in batches)
    assert batched >= min_batched * n, "only %d of %d nodes ran in batches" % (batched, n)
    return batches


def _seqs(rng, n=5):
    return [list(rng.randint(V, size=rng.randint(1, 7))) for _ in range(n)]


RNNS = {
    "SimpleRNN": lambda m: dy.SimpleRNNBuilder(2, D, H, m),
    "GRU": lambda m: dy.GRUBuilder(1, D, H, m),
    "VanillaLSTM": lambda m: dy.VanillaLSTMBuilder(2, D, H, m),
    "VanillaLSTM-ln": lambda m: dy.VanillaLSTMBuilder(1, D, H, m, ln_lstm=True),
    "CompactVanillaLSTM": lambda m: dy.CompactVanillaLSTMBuilder(1, D, H, m),
    "CoupledLSTM": lambda m: dy.CoupledLSTMBuilder(1, D, H, m),
    "FastLSTM": lambda m: dy.FastLSTMBuilder(1, D, H, m),
    "SparseLSTM": lambda m: dy.SparseLSTMBuilder(1, D, H, m),
}


@pytest.mark.parametrize("name", sorted(RNNS))
@pytest.mark.parametrize("style", ["transduce", "add_input"])
def test_rnn_builders(name, style, float64):
    def run(rnn, E, rng):
        out = []
        for s in _seqs(rng):
            xs = [E[w] for w in s]
            st = rnn.initial_state()
            if style == "transduce":
                hs = st.transduce(xs)
            else:
                hs = []
                for x in xs:
                    st = st.add_input(x)
                    hs.append(st.output())
            out.append(dy.esum([dy.sum_elems(dy.cmult(h, h)) for h in hs]))
        return out

    _compare(RNNS[name], run)


def test_bilstm_tagger(float64):
    """The tagger of the benchmarks: BiLSTM, MLP, pickneglogsoftmax per token."""

    def make(m):
        return (
            dy.BiRNNBuilder(1, D, 2 * H, m, dy.VanillaLSTMBuilder),
            m.add_parameters((4, 2 * H)),
            m.add_parameters(4),
        )

    def run(b, E, rng):
        bi, W, bias = b
        out = []
        for s in _seqs(rng, 6):
            hs = bi.transduce([E[w] for w in s])
            out.append(dy.esum([dy.pickneglogsoftmax(W * h + bias, int(w) % 4) for h, w in zip(hs, s)]))
        return out

    _compare(make, run)


def test_rnn_dropout(float64):
    """Tied variational dropout: the masks are per builder and graph, so the
    same in both engines (drawn before any batch runs)."""

    def make(m):
        b = dy.VanillaLSTMBuilder(1, D, H, m)
        b.set_dropouts(0.3, 0.3)
        return b

    def run(rnn, E, rng):
        return [dy.sum_elems(rnn.initial_state().transduce([E[w] for w in s])[-1]) for s in _seqs(rng)]

    _compare(make, run)


def _trees(rng, n=5):
    def tree(depth):
        if depth == 0 or rng.rand() < 0.3:
            return int(rng.randint(V))
        return (tree(depth - 1), tree(depth - 1))

    return [tree(rng.randint(1, 4)) for _ in range(n)]


TREES = {
    "NaryTreeLSTM": lambda m: dy.NaryTreeLSTMBuilder(2, 1, D, H, m),
    "NaryTreeLSTM-2layers": lambda m: dy.NaryTreeLSTMBuilder(2, 2, D, H, m),
    "NaryTreeLSTM-cell": lambda m: dy.NaryTreeLSTMBuilder(2, 1, D, H, m, cell_terms=True),
    "ChildSumTreeLSTM": lambda m: dy.ChildSumTreeLSTMBuilder(1, D, H, m),
    "TreeRNN": lambda m: dy.TreeRNNBuilder(2, H, m, input_dim=D),
    "BidirectionalTreeLSTM": lambda m: dy.BidirectionalTreeLSTMBuilder(1, D, D, m),
}


@pytest.mark.parametrize("name", sorted(TREES))
def test_tree_builders(name, float64):
    def run(tb, E, rng):
        def enc(t):
            if isinstance(t, int):
                return tb.add_input(E[t])
            return tb.compose([enc(t[0]), enc(t[1])])

        return [dy.sum_elems(enc(t).output()) for t in _trees(rng)]

    _compare(TREES[name], run)


def test_softmax_builders(float64):
    def make(m):
        return dy.StandardSoftmaxBuilder(H, V, m), dy.VanillaLSTMBuilder(1, D, H, m)

    def run(b, E, rng):
        sm, rnn = b
        out = []
        for s in _seqs(rng):
            hs = rnn.initial_state().transduce([E[w] for w in s])
            out.append(dy.esum([sm.neg_log_softmax(h, int(w)) for h, w in zip(hs, s[1:] + [0])]))
        return out

    _compare(make, run)


@pytest.mark.parametrize("style", ["add_inputs", "add_input"])
def test_lstm_states(style, float64):
    """The fused LSTM's states (h-valued steps, c kept in their scratch) under batching: c()
    and s() of a middle state read by the loss, that state continued with one more input
    (its c read from another batch's scratch), two layers, recurrent dropout, and sequences
    of different lengths (members drop out of the step batches)."""

    def make(m):
        b = dy.VanillaLSTMBuilder(2, D, H, m)
        b.set_dropouts(0.2, 0.3)
        return b

    def run(rnn, E, rng):
        out = []
        for s in _seqs(rng, 6):
            xs, st = [E[w] for w in s], rnn.initial_state()
            if style == "add_inputs":
                states = st.add_inputs(xs)
            else:
                states = []
                for x in xs:
                    st = st.add_input(x)
                    states.append(st)
            mid = states[len(states) // 2]
            out.append(dy.sum_elems(dy.cmult(states[-1].output(), states[-1].output())))
            out.append(dy.esum([dy.sum_elems(e) for e in mid.s()]))
            out.append(dy.sum_elems(mid.add_input(E[int(s[0])]).s()[1]))  # its c of layer 2
        return out

    _compare(make, run)
