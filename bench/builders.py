"""Builders: per-token forward+backward time of dyn's builders against PyTorch eager.

Each benchmark is a function in ``BENCHMARKS`` taking the parsed arguments and
returning result rows; a new benchmark (e.g. the Tree-LSTM) is one more
function appended to that list. Every comparison runs dyn and PyTorch
alternately in the same process (same machine state), single-threaded, and
reports medians over ``--repeats`` timed rounds after a warm-up, the ratio
PyTorch/dyn ("speedup": how many times faster dyn is) and the range of the
per-round paired ratios.

VanillaLSTMBuilder (``bench_vanilla_lstm``), hidden 50 and 256, input = hidden,
sentences of ``--length`` tokens drawn from a 1,000-word embedding table; the
loss is the sum of all outputs; each round renews the graph, looks up the
embeddings, runs the LSTM, and calls forward and backward (no update):

* ``transduce``: ``lstm.initial_state().transduce(xs)`` against ``nn.LSTM``
  on the whole sentence (PyTorch's fused sequence LSTM);
* ``add_input``: one ``add_input`` per token (what per-token dynamic code,
  e.g. a decoder, does) against ``nn.LSTMCell`` called per token.

    pip install torch==2.13.0          # optional: the PyTorch half
    python bench/builders.py --repeats 7
    python bench/builders.py --quick   # smoke run
"""

import argparse
import os
import statistics
import time

# thread counts are read when the BLAS/OpenMP runtimes load: set them before
# numpy, dyn or torch is imported (they are imported inside the functions)
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"


def parse_args(argv=None):
    """Parses the flags, ignoring DyNet's own ``--dynet-*`` flags."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed rounds")
    parser.add_argument("--sentences", type=int, default=50, help="sentences per round")
    parser.add_argument("--length", type=int, default=20, help="tokens per sentence")
    parser.add_argument("--hidden", type=int, nargs="*", default=[50, 256])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="2 repeats, 5 sentences")
    parser.add_argument("--no-torch", action="store_true", help="skip PyTorch")
    args, _ = parser.parse_known_args(argv)
    if args.quick:
        args.repeats, args.sentences = 2, 5
    return args


def _torch(args):
    if args.no_torch:
        return None
    try:
        import torch
    except ImportError as err:
        print(f"torch=unavailable ({err})")
        return None
    torch.set_num_threads(1)
    return torch


def compare(name, runs, repeats, tokens):
    """Times the runs ({toolkit: fn}) alternately; returns one result row.

    Args:
        name: the row's label.
        runs: ``{"dyn": fn, "torch": fn}`` (torch may be missing); each fn
            runs one round.
        repeats: timed rounds (after one warm-up round each).
        tokens: tokens per round (times are reported per token).
    """
    times = {k: [] for k in runs}
    for fn in runs.values():
        fn()
    for _ in range(repeats):
        for k, fn in runs.items():
            t = time.perf_counter()
            fn()
            times[k].append((time.perf_counter() - t) / tokens * 1e6)
    row = {"name": name, "dyn_us": statistics.median(times["dyn"])}
    if "torch" in times:
        row["torch_us"] = statistics.median(times["torch"])
        row["speedup"] = row["torch_us"] / row["dyn_us"]
        paired = sorted(t / d for t, d in zip(times["torch"], times["dyn"]))
        row["paired"] = (paired[0], paired[-1])
    return row


def bench_vanilla_lstm(args):
    """VanillaLSTMBuilder against nn.LSTM (transduce) and nn.LSTMCell (add_input)."""
    import numpy as np

    import dyn as dy

    torch = _torch(args)
    rng = np.random.RandomState(args.seed)
    vocab, rows = 1000, []
    sents = [rng.randint(0, vocab, size=args.length).tolist() for _ in range(args.sentences)]
    tokens = args.sentences * args.length
    for H in args.hidden:
        model = dy.ParameterCollection()
        E = model.add_lookup_parameters((vocab, H))
        lstm = dy.VanillaLSTMBuilder(1, H, H, model, forget_bias=0.0)

        def dyn_transduce():
            for s in sents:
                dy.renew_cg()
                outs = lstm.initial_state().transduce([E[w] for w in s])
                loss = dy.sum_elems(dy.esum(outs))
                loss.value()
                loss.backward()

        def dyn_add_input():
            for s in sents:
                dy.renew_cg()
                state, outs = lstm.initial_state(), []
                for w in s:
                    state = state.add_input(E[w])
                    outs.append(state.output())
                loss = dy.sum_elems(dy.esum(outs))
                loss.value()
                loss.backward()

        runs_seq, runs_step = {"dyn": dyn_transduce}, {"dyn": dyn_add_input}
        if torch is not None:
            emb = torch.nn.Embedding(vocab, H)
            t_lstm, cell = torch.nn.LSTM(H, H), torch.nn.LSTMCell(H, H)
            t_sents = [torch.tensor(s) for s in sents]
            _check_same(dy, lstm, E, torch, emb, t_lstm, sents[0], H)

            def torch_lstm():
                for s in t_sents:
                    out, _ = t_lstm(emb(s).unsqueeze(1))
                    out.sum().backward()

            def torch_cell():
                for s in t_sents:
                    x = emb(s)
                    h = c = torch.zeros(1, H)
                    outs = []
                    for t in range(len(s)):
                        h, c = cell(x[t : t + 1], (h, c))
                        outs.append(h)
                    torch.stack(outs).sum().backward()

            runs_seq["torch"], runs_step["torch"] = torch_lstm, torch_cell
        rows.append(compare(f"VanillaLSTM H={H} transduce vs nn.LSTM", runs_seq, args.repeats, tokens))
        rows.append(compare(f"VanillaLSTM H={H} add_input vs nn.LSTMCell", runs_step, args.repeats, tokens))
    return rows


def _check_same(dy, lstm, E, torch, emb, t_lstm, sent, H):
    """Copies dyn's weights into PyTorch and checks both compute the same loss.

    DyNet's gate rows are [i; f; o; g], PyTorch's [i; f; g; o]; PyTorch has
    two biases (the second is zeroed).
    """
    import numpy as np

    Wx, Wh, b = (p.as_array() for p in lstm.get_parameters()[0])
    order = np.r_[0 : 2 * H, 3 * H : 4 * H, 2 * H : 3 * H]
    with torch.no_grad():
        t_lstm.weight_ih_l0.copy_(torch.tensor(Wx[order]))
        t_lstm.weight_hh_l0.copy_(torch.tensor(Wh[order]))
        t_lstm.bias_ih_l0.copy_(torch.tensor(b[order]))
        t_lstm.bias_hh_l0.zero_()
        emb.weight.copy_(torch.tensor(E.as_array()))
    dy.renew_cg()
    want = dy.sum_elems(dy.esum(lstm.initial_state().transduce([E[w] for w in sent]))).value()
    got = t_lstm(emb(torch.tensor(sent)).unsqueeze(1))[0].sum().item()
    assert abs(want - got) <= 1e-3 * max(1.0, abs(got)), (want, got)


def _random_tree(rng, words):
    """A uniformly drawn binary bracketing of words: an int leaf or a (left, right) pair."""
    if len(words) == 1:
        return int(words[0])
    k = rng.randint(1, len(words))
    return (_random_tree(rng, words[:k]), _random_tree(rng, words[k:]))


def bench_nary_tree_lstm(args):
    """The binary (N=2) NaryTreeLSTMBuilder, hidden 128, against the same cell in PyTorch eager.

    SST-like trees: sentence lengths drawn around 19 words (2..50), random
    binary bracketings, words from a 1,000-word table of 128-dim embeddings.
    A leaf is ``add_input(E[w])`` (gates from Wx), an inner node
    ``compose([left, right])`` (gates from U [h_l; h_r]). PyTorch runs the same
    equations node by node with one ``nn.Linear`` per node (the efficient
    eager formulation: one matrix product for all gates). The loss is the sum
    of the root's h; forward and backward per tree, no update; time per token
    (word; a binary tree has 2n-1 nodes for n words).
    """
    import numpy as np

    import dyn as dy

    torch = _torch(args)
    rng = np.random.RandomState(args.seed)
    H, vocab = 128, 1000
    lengths = np.clip(rng.normal(19, 9, size=args.sentences).round().astype(int), 2, 50)
    trees = [_random_tree(rng, rng.randint(0, vocab, size=n)) for n in lengths]
    tokens = int(lengths.sum())
    model = dy.ParameterCollection()
    E = model.add_lookup_parameters((vocab, H))
    lstm = dy.NaryTreeLSTMBuilder(2, 1, H, H, model)

    def encode(t):
        if isinstance(t, int):
            return lstm.add_input(E[t])
        return lstm.compose([encode(t[0]), encode(t[1])])

    def dyn_trees():
        for t in trees:
            dy.renew_cg()
            loss = dy.sum_elems(encode(t).output())
            loss.value()
            loss.backward()

    runs = {"dyn": dyn_trees}
    if torch is not None:
        emb = torch.nn.Embedding(vocab, H)
        leaf, inner = torch.nn.Linear(H, 3 * H), torch.nn.Linear(2 * H, 5 * H)
        Wx, U, b = (torch.tensor(p.as_array(), dtype=torch.float32) for p in lstm.get_parameters()[0])
        with torch.no_grad():  # dyn's rows [i; o; u; f_0; f_1]: the same layout
            emb.weight.copy_(torch.tensor(E.as_array()))
            leaf.weight.copy_(Wx[: 3 * H])
            leaf.bias.copy_(b[: 3 * H])
            inner.weight.copy_(U)
            inner.bias.copy_(b)
        t_trees = [_torch_tree(torch, t) for t in trees]

        def t_encode(t):
            if not isinstance(t, tuple):
                i, o, u = leaf(emb(t)).split(H)
                c = torch.sigmoid(i) * torch.tanh(u)
                return torch.sigmoid(o) * torch.tanh(c), c
            (h1, c1), (h2, c2) = t_encode(t[0]), t_encode(t[1])
            i, o, u, f1, f2 = inner(torch.cat([h1, h2])).split(H)
            c = torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(f1 + 1) * c1 + torch.sigmoid(f2 + 1) * c2
            return torch.sigmoid(o) * torch.tanh(c), c

        def torch_trees():
            for t in t_trees:
                t_encode(t)[0].sum().backward()

        dy.renew_cg()
        want = dy.sum_elems(encode(trees[0]).output()).value()
        got = t_encode(t_trees[0])[0].sum().item()
        assert abs(want - got) <= 1e-3 * max(1.0, abs(got)), (want, got)
        runs["torch"] = torch_trees
    return [compare(f"NaryTreeLSTM N=2 H={H} trees vs eager cell", runs, args.repeats, tokens)]


def _torch_tree(torch, t):
    """The tree with each leaf's word as a (scalar) tensor, made once."""
    if isinstance(t, int):
        return torch.tensor(t)
    return (_torch_tree(torch, t[0]), _torch_tree(torch, t[1]))


BENCHMARKS = [bench_vanilla_lstm, bench_nary_tree_lstm]


def main(argv=None):
    args = parse_args(argv)
    for bench in BENCHMARKS:
        for row in bench(args):
            line = "%-48s dyn=%8.2f us/token" % (row["name"], row["dyn_us"])
            if "torch_us" in row:
                line += "  torch=%8.2f us/token  speedup=%5.2fx  (paired %.2f-%.2f)" % (
                    row["torch_us"],
                    row["speedup"],
                    *row["paired"],
                )
            print(line, flush=True)


if __name__ == "__main__":
    main()
