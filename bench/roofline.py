"""How close an RNN LM training step comes to this core's limits: sgemm peak and memory bandwidth.

Measures, single-threaded: the sgemm peak (a large numpy float32 matrix product), the memory
bandwidth (a large numpy copy, and an in-place add: bytes read + bytes written per second), the
same BLAS (scipy's, which dyn calls) and dyn's own dispatch on the softmax layer's three matrix
products, and a training
step of bench/tasks/rnnlm.py's model (settings.RNNLM: vocabulary 10k, embedding 128, LSTM 256,
Adam, dense updates) on random word ids, phase by phase: graph building, forward, backward,
trainer.update(). Reports the step's matrix-product rate as a fraction of the sgemm peak and the
Adam step's traffic (value, gradient and two moments read and written: 32 bytes per parameter)
as a fraction of the better of the two bandwidths. With --torch, also PyTorch's step on the same
model (time only).

With --trace, also every matrix product of dyn's steps (blas._trace): shape, path, time and rate,
and how much of the step is left outside them.

    python bench/roofline.py [--batch 1,64] [--steps 22] [--repeats 12] [--torch] [--trace]
"""

import argparse
import os
import sys
import time

for _k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_k, "1")  # before numpy loads its BLAS

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "tasks"))

import common  # noqa: E402
import numpy as np  # noqa: E402
from settings import ADAM_LR, RNNLM  # noqa: E402

V, E, H = RNNLM.vocab, RNNLM.wembed, RNNLM.hidden


def best(f, repeats):
    f()
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts)


def sgemm_peak(sizes=(1024, 2048, 3072), repeats=8):
    """numpy float32 products of large square matrices: the median rate of each size, the best
    size (on a shared machine single timings stray both ways)."""
    rng = np.random.RandomState(0)
    rates = []
    for n in sizes:
        a, b = rng.rand(n, n).astype(np.float32), rng.rand(n, n).astype(np.float32)
        a @ b
        ts = []
        for _ in range(repeats):
            t = time.perf_counter()
            a @ b
            ts.append(time.perf_counter() - t)
        rates.append(2.0 * n**3 / float(np.median(ts)) / 1e9)
    return max(rates)


def bandwidth(mib=256, repeats=8):
    """GB/s of a large numpy copy (bytes read + written) and of an in-place add a += b (read a and
    b, write a: the read-then-write pattern of an optimizer step, which also avoids the copy's
    extra read of the destination's cache lines before they are written)."""
    a = np.ones(mib * 2**20 // 4, np.float32)
    b = np.empty_like(a)
    copy = 2.0 * a.nbytes / best(lambda: np.copyto(b, a), repeats) / 1e9
    add = 3.0 * a.nbytes / best(lambda: np.add(a, b, out=a), repeats) / 1e9
    return copy, add


def blas_softmax_layer(N, repeats):
    """The softmax layer's products for N tokens, GFLOP/s each: scipy's sgemm (OpenBLAS, which dyn
    calls where its own loops do not pay) and dyn's gemm (the path its dispatch takes for the
    shape: blas._skinny_path), each into a C allocated once, G h^T added into C (beta = 1) as a
    weight's gradient is."""
    from scipy.linalg import blas

    from dyn._core.cpu import blas as dyn_blas

    rng = np.random.RandomState(0)
    W = np.asfortranarray(rng.randn(V, H).astype(np.float32))
    h = np.asfortranarray(rng.randn(H, N).astype(np.float32))
    G = np.asfortranarray(rng.randn(V, N).astype(np.float32))
    S, D, dW = (np.zeros(s, np.float32, order="F") for s in ((V, N), (H, N), (V, H)))
    fl = 2.0 * V * H * N / 1e9
    rates = {}
    for name, op, A, B, C, beta, kw in (("W h", "NN", W, h, S, 0.0, {}),
                                        ("W^T G", "TN", W, G, D, 0.0, {"trans_a": 1}),
                                        ("G h^T", "NT", G, h, dW, 1.0, {"trans_b": 1})):
        rates[name] = (
            fl / best(lambda: blas.sgemm(1.0, A, B, beta=beta, c=C, overwrite_c=1, **kw), repeats),
            fl / best(lambda: dyn_blas._gemm("auto", op, A, B, 1.0, beta, C), repeats),
            dyn_blas._skinny_path(op, *((V, N, H), (H, N, V), (V, H, N))[len(rates)]),
        )
    return rates


def step_flops(B, T):
    """Multiply-adds x 2 of one step: softmax layer and LSTM, forward and backward (3x forward)."""
    N = B * T
    return 6.0 * N * V * H + 6.0 * N * 4 * H * E + 6.0 * (N - B) * 4 * H * H


def dyn_step(B, T, repeats):
    import dyn as dy

    m = dy.ParameterCollection()
    trainer = common.dyn_trainer(dy, m, sparse=False)
    lookup = m.add_lookup_parameters((V, E))
    W_sm, b_sm = m.add_parameters((V, H)), m.add_parameters(V)
    rnn = dy.VanillaLSTMBuilder(1, E, H, m)
    rng = np.random.RandomState(0)
    phases = []
    for _ in range(repeats + 2):
        wids = [int(w) for w in rng.randint(0, V, B * T)]
        t0 = time.perf_counter()
        dy.renew_cg()
        W, b = dy.parameter(W_sm), dy.parameter(b_sm)
        xs = [dy.lookup_batch(lookup, [0] * B)] + [
            dy.lookup_batch(lookup, wids[i * B : (i + 1) * B]) for i in range(T - 1)
        ]
        hs = dy.concatenate_to_batch(rnn.initial_state().transduce(xs))
        loss = dy.sum_batches(dy.pickneglogsoftmax_batch(dy.affine_transform([b, W, hs]), wids))
        t1 = time.perf_counter()
        loss.scalar_value()
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        trainer.update()
        t4 = time.perf_counter()
        phases.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3))
    med = np.median(np.array(phases[2:]), axis=0)  # the first steps grow the arenas
    return dict(zip(("build", "forward", "backward", "update"), med)), m.parameter_count()


def torch_step(B, T, repeats):
    import torch

    torch.set_num_threads(1)
    emb, lstm, out = torch.nn.Embedding(V, E), torch.nn.LSTM(E, H), torch.nn.Linear(H, V)
    params = list(emb.parameters()) + list(lstm.parameters()) + list(out.parameters())
    opt = torch.optim.Adam(params, lr=ADAM_LR)
    rng = np.random.RandomState(0)
    ts = []
    for _ in range(repeats + 2):
        tgt = torch.tensor(rng.randint(0, V, (T, B)))
        inp = torch.cat([torch.zeros(1, B, dtype=torch.long), tgt[:-1]])
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(
            out(lstm(emb(inp))[0]).flatten(0, 1), tgt.flatten(), reduction="sum"
        )
        loss.item()
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        ts.append((t1 - t0, t2 - t1, t3 - t2))
    return dict(zip(("forward", "backward", "update"), np.median(np.array(ts[2:]), axis=0)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", default="1,64", help="minibatch sizes (sentences)")
    p.add_argument("--steps", type=int, default=22, help="sentence length (PTB's mean is about 22)")
    p.add_argument("--repeats", type=int, default=12)
    p.add_argument("--torch", action="store_true", help="PyTorch's step on the same model too")
    p.add_argument("--trace", action="store_true",
                   help="dyn's matrix products in its steps: shape, path, time and rate per step")
    args = p.parse_args(argv)
    # the machine may be shared: the limits are the best of two rounds, before and after the steps
    peak, (copy, add) = sgemm_peak(), bandwidth()
    runs = []
    for B in map(int, args.batch.split(",")):
        N = B * args.steps
        blas_rates = blas_softmax_layer(N, max(3, args.repeats // 3))
        traced = None
        if args.trace:
            from dyn._core.cpu import blas as dyn_blas

            dyn_step(B, args.steps, 1)   # the arenas grown first: every traced step is a steady one
            dyn_blas._trace_reset()
            dyn_blas._trace(True)
        try:
            ph, nparams = dyn_step(B, args.steps, args.repeats)
        finally:
            if args.trace:
                dyn_blas._trace(False)
                traced = dyn_blas._trace_table()[0]
        tp = torch_step(B, args.steps, args.repeats) if args.torch else None
        runs.append((B, N, blas_rates, ph, nparams, tp, traced))
    peak2, (copy2, add2) = sgemm_peak(), bandwidth()
    peak, copy, add = max(peak, peak2), max(copy, copy2), max(add, add2)
    bw = max(copy, add)
    print("sgemm_peak_gflops=%.1f (numpy float32 n^3, n = 1024..3072, median rate, 1 thread)" % peak)
    print("copy_bandwidth_gbs=%.1f in_place_add_gbs=%.1f" % (copy, add))
    for B, N, blas_rates, ph, nparams, tp, traced in runs:
        print("\n# minibatch %d x %d steps (%d tokens)" % (B, args.steps, N))
        for k, (v, d, path) in blas_rates.items():
            print("blas_%s_gflops=%.1f (%.0f%% of peak); dyn's gemm %.1f (%.0f%%, path %s)"
                  % (k.replace(" ", ""), v, 100 * v / peak, d, 100 * d / peak, path))
        fl = step_flops(B, args.steps) / 1e9
        fb = ph["forward"] + ph["backward"]
        total = sum(ph.values())
        print(
            "dyn_ms "
            + " ".join("%s=%.2f" % (k, 1e3 * v) for k, v in ph.items())
            + " total=%.2f" % (1e3 * total)
        )
        print("dyn_words_per_sec=%.0f" % (N / total))
        print(
            "dyn_fwd_bwd_gflops=%.1f (%.0f%% of the sgemm peak); whole step %.1f (%.0f%%)"
            % (fl / fb, 100 * fl / fb / peak, fl / total, 100 * fl / total / peak)
        )
        gbs = 32.0 * nparams / ph["update"] / 1e9
        print(
            "dyn_adam_gbs=%.1f (%.0f%% of the memory bandwidth; %d parameters, 32 bytes each)"
            % (gbs, 100 * gbs / bw, nparams)
        )
        if traced:
            # every traced step counted (the arenas already grown): per step on average
            steps = args.repeats + 2
            prod = sum(r[7] for r in traced) / steps
            print("dyn_products_ms=%.2f per step (%.0f%% of the step's median), the rest %.2f:"
                  % (1e3 * prod, 100 * prod / total, 1e3 * (total - prod)))
            for op, m, n, k, path, _dt, calls, secs in sorted(traced, key=lambda r: -r[7]):
                if secs / steps < 1e-4:
                    continue
                print("  %s %d x %d, k %d (%s): %g a step, %.2f ms, %.1f GFLOP/s"
                      % (op, m, n, k, path, calls / steps, 1e3 * secs / steps,
                         2.0 * m * n * k * calls / secs / 1e9))
        if tp:
            tt = sum(tp.values())
            print(
                "torch_ms "
                + " ".join("%s=%.2f" % (k, 1e3 * v) for k, v in tp.items())
                + " total=%.2f" % (1e3 * tt)
            )
            print(
                "torch_words_per_sec=%.0f; fwd+bwd %.1f GFLOP/s; dyn/torch speed %.2f"
                % (N / tt, fl / (tp["forward"] + tp["backward"]), tt / total)
            )


if __name__ == "__main__":
    sys.exit(main())
