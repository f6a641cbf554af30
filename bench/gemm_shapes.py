"""float32 matrix products with one small side: dyn's register-blocked kernels against OpenBLAS.

For each shape, C = A B (A m x k, B k x n), C = A^T B (A k x m) and C = A B^T (B n x k), all with
beta = 1 as in a gradient's accumulation, run through OpenBLAS's sgemm and through
dyn/_core/cpu/_skinnygemm.h, alternating, three rounds; the time of each is the median round,
and ``ratio`` is OpenBLAS's time over dyn's (above 1: dyn's kernel is faster). ``auto`` is the
path dyn's gemm takes for the shape (dyn/_core/cpu/blas.pyx's _skinny thresholds, which come
from this grid). The shapes are those of the paper's tasks: a 10k softmax over a sentence's
steps (n = its length), an LSTM step's gate product over a minibatch (n = its size), a
Tree-LSTM's 640 x 256 gate matrix over a tree level, weight gradients from a batch of k
columns, and smaller per-example layers.

    python bench/gemm_shapes.py [--time S] [--quick] [--ops NN,TN,NT] [--cols | --narrow | --large]
    python bench/gemm_shapes.py --prefetch [--quick]
    python bench/gemm_shapes.py --big [--quick] [--ops NN,NT]

--big compares, on products with every side large (a softmax's W h over a minibatch's tokens and
its weight gradient G H^T, an LSTM's gates over a whole minibatched sequence), the path gemm takes
without _biggemm.h (blas._set_big(False): OpenBLAS, or OpenBLAS on the transposed product) against
_biggemm.h's blocked loop, beta = 1 as above; ``auto`` is the path gemm takes now.
"""

import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from dyn._core.cpu import blas  # noqa: E402

# (m, n, k) of C (m x n) = op(A) op(B), op(A) m x k
# A B: the softmax's scores W h over a sentence's n steps; an LSTM step's gates over n examples
_NN = ([(10000, n, 256) for n in (1, 2, 4, 8, 16, 22, 32, 48)]
       + [(1024, n, 256) for n in (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128)]
       + [(640, n, 256) for n in (2, 4, 8, 16, 32, 64, 96, 128)]
       + [(512, n, 128) for n in (1, 2, 4, 8, 16, 32, 64, 96, 128)]
       + [(256, n, 64) for n in (2, 4, 8, 16, 32)]
       + [(128, n, 64) for n in (2, 4, 8, 16, 32)]
       + [(64, n, 32) for n in (4, 16, 25)])
# an LSTM step's gradient reaching h_{t-1}, Wh^T d, as a product with Wh's transposed copy
# (dyn/_core/cpu/rnn.pyx): A B with A the H x 4H transpose
_NN_T = ([(256, n, 1024) for n in (4, 8, 16, 32, 48, 64, 96, 128)]
         + [(128, n, 512) for n in (4, 8, 16, 32, 64, 128)])
SHAPES = {
    "NN": _NN + _NN_T,
    # A^T B over the same matrices: the gradient reaching h through W (the long dimension is
    # the inner one)
    "TN": [(k, n, m) for m, n, k in _NN],
    # A B^T: a weight's gradient from a batch of k columns
    "NT": ([(10000, 256, k) for k in (2, 4, 8, 16, 22, 32)]
           + [(1024, 256, k) for k in (2, 4, 8, 16, 32, 64)]
           + [(640, 256, k) for k in (2, 3, 4, 6, 8, 16)]
           + [(512, 128, k) for k in (2, 4, 8, 16, 32)]
           + [(256, 64, k) for k in (2, 4, 8, 16, 32)]
           + [(128, 64, k) for k in (2, 4, 8, 16)]),
}
QUICK = {"NN": [(10000, 22, 256), (1024, 16, 256)], "TN": [(256, 22, 10000), (64, 8, 256)],
         "NT": [(10000, 256, 22), (640, 256, 4)]}


def timed(path, op, A, B, C, budget):
    """Seconds per call of one path, with enough calls to fill budget seconds."""
    per = blas._gemm(path, op, A, B, 1.0, 1.0, C, 1)
    reps = max(1, int(budget / max(per, 1e-7)))
    return blas._gemm(path, op, A, B, 1.0, 1.0, C, reps)


# --narrow adds a BiLSTM tagger's products over a 25-word sentence (its MLP, an LSTM's input
# projection) and a character LSTM step's over a few words (a sentence's rare words: 2-13),
# forward and backward
NARROW_EXTRA = {"NN": [(32, 25, 100), (200, 25, 128)] + [(256, n, 64) for n in (1, 3, 5, 6, 12)],
                "TN": [(100, 25, 32), (128, 25, 200)] + [(64, n, 256) for n in (1, 2, 3, 5, 6, 12)]}


# --big: C = A B and C = A B^T with every side large (a softmax over 16-64 sentences of 22 words:
# 352-1,408 tokens; an LSTM's gates over the same tokens)
BIG = {"NN": ([(10000, n, 256) for n in (48, 64, 96, 128, 256, 352, 704, 1408)]
              + [(4096, n, 256) for n in (64, 128, 352, 1408)]
              + [(1024, n, k) for k in (128, 256) for n in (64, 128, 352, 1408)]
              + [(10000, n, 128) for n in (64, 352)] + [(10000, n, 512) for n in (64, 352)]),
       "NT": ([(10000, 256, k) for k in (32, 48, 64, 128, 256, 352, 432, 704, 1408)]
              + [(4096, 256, k) for k in (64, 352, 1408)]
              + [(1024, n, k) for n in (128, 256) for k in (64, 128, 352, 1408)]
              + [(10000, 128, k) for k in (64, 352)] + [(10000, 512, k) for k in (64, 352)])}
BIG_QUICK = {"NN": [(10000, 352, 256), (1024, 64, 128)], "NT": [(10000, 256, 432), (1024, 128, 64)]}


def compare_big(op, m, n, k, budget, rng):
    """The path gemm takes without _biggemm.h against its loop: (seconds, seconds, rel. error)."""
    A = np.asfortranarray(rng.standard_normal((m, k), dtype=np.float32))
    B = np.asfortranarray(rng.standard_normal((k, n) if op[1] == "N" else (n, k), dtype=np.float32))
    C0 = np.asfortranarray(rng.standard_normal((m, n), dtype=np.float32))
    ref, got = C0.copy(order="F"), C0.copy(order="F")
    blas._gemm("blas", op, A, B, 1.0, 1.0, ref)
    blas._gemm("big", op, A, B, 1.0, 1.0, got)
    err = float(np.abs(ref - got).max() / max(np.abs(ref).max(), 1e-30))
    C = C0.copy(order="F")
    old = blas._set_big(False)
    try:
        rounds = []
        for _ in range(3):
            rounds.append((timed("auto", op, A, B, C, budget), timed("big", op, A, B, C, budget)))
        base = blas._skinny_path(op, m, n, k)
    finally:
        blas._set_big(old)
    return sorted(r[0] for r in rounds)[1], sorted(r[1] for r in rounds)[1], err, base


def big_grid(ops, quick, budget):
    rng = np.random.default_rng(0)
    print(f"{'op':4} {'m':>6} {'n':>5} {'k':>5}  {'without':>13} {'GF/s':>6} {'big GF/s':>8} {'ratio':>6}  "
          "auto  rel.err")
    for op in ops:
        for m, n, k in (BIG_QUICK if quick else BIG)[op]:
            b, d, err, base = compare_big(op, m, n, k, budget, rng)
            fl = 2.0 * m * n * k / 1e9
            print(f"{op:4} {m:6d} {n:5d} {k:5d}  {base:>13} {fl / b:6.1f} {fl / d:8.1f} {b / d:6.2f}  "
                  f"{blas._skinny_path(op, m, n, k):4}  {err:.1e}", flush=True)


def compare(op, m, n, k, budget, rng, own=None):
    A = np.asfortranarray(rng.standard_normal((m, k) if op[0] == "N" else (k, m), dtype=np.float32))
    B = np.asfortranarray(rng.standard_normal((k, n) if op[1] == "N" else (n, k), dtype=np.float32))
    C0 = np.asfortranarray(rng.standard_normal((m, n), dtype=np.float32))
    own = own or op.lower()
    ref, got = C0.copy(order="F"), C0.copy(order="F")
    blas._gemm("blas", op, A, B, 1.0, 1.0, ref)
    blas._gemm(own, op, A, B, 1.0, 1.0, got)
    err = float(np.abs(ref - got).max() / max(np.abs(ref).max(), 1e-30))
    rounds = []
    C = C0.copy(order="F")
    for _ in range(3):
        b = timed("blas", op, A, B, C, budget)
        d = timed(own, op, A, B, C, budget)
        rounds.append((b, d))
    b = sorted(r[0] for r in rounds)[1]
    d = sorted(r[1] for r in rounds)[1]
    return b, d, err


PREFETCH_COLS = (2, 4, 8, 12, 16, 22, 32, 48, 64)


def prefetch_grid(quick):
    """dyn_sgemm_nn with A's row panels fetched one ahead against two ahead (blas._set_nn_far 0
    and 2), alternating, 15 calls each (5 with --quick), median: a 10,000 x 256 A flushed from the
    caches before each call (a softmax's weights, as a training step finds them after the
    optimizer's pass) and a 1,024 x 256 A in them (an LSTM's gates). ``ratio`` is one-ahead's
    time over two-ahead's (above 1: two ahead is faster)."""
    rng = np.random.default_rng(0)
    flush = np.ones(64 << 20 >> 2, np.float32)
    sink = np.empty_like(flush)
    calls = 5 if quick else 15
    old = blas._set_nn_far(0)
    try:
        print(f"{'A':>11} {'cache':>6} {'n':>4}  {'one ahead GF/s':>14} {'two ahead GF/s':>14} {'ratio':>6}")
        for m, k, cold in ((10000, 256, True), (1024, 256, False)):
            A = np.asfortranarray(rng.standard_normal((m, k), dtype=np.float32))
            for n in PREFETCH_COLS[::3] if quick else PREFETCH_COLS:
                B = np.asfortranarray(rng.standard_normal((k, n), dtype=np.float32))
                C = np.asfortranarray(np.zeros((m, n), np.float32))
                t = {0: [], 2: []}
                for r in range(calls):
                    for mode in (0, 2) if r % 2 == 0 else (2, 0):
                        blas._set_nn_far(mode)
                        if cold:
                            np.copyto(sink, flush)
                        t[mode].append(blas._gemm("nn", "NN", A, B, 1.0, 1.0, C, 1 if cold else 5))
                one, two = (sorted(t[mode])[calls // 2] for mode in (0, 2))
                flops = 2.0 * m * n * k
                print(f"{m:5d} x {k:3d} {'cold' if cold else 'warm':>6} {n:4d}  {flops / one / 1e9:14.1f} "
                      f"{flops / two / 1e9:14.1f} {one / two:6.3f}", flush=True)
    finally:
        blas._set_nn_far(old)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--time", type=float, default=0.05, help="seconds per path per round and shape")
    p.add_argument("--quick", action="store_true", help="two shapes per product, short runs")
    p.add_argument("--ops", default="NN,TN,NT", help="which products, comma-separated (default: all three)")
    p.add_argument("--cols", action="store_true",
                   help="OpenBLAS against a matrix-vector product per column (the path machines "
                   "without AVX-512 take at 1-8 columns), on the A B and A^T B shapes of up to 16 columns")
    p.add_argument("--narrow", action="store_true",
                   help="OpenBLAS against dyn/_core/cpu/_narrowgemm.h (machines without AVX-512), on the "
                   "A B and A^T B shapes of up to 32 columns and a tagger's and an LSTM step's")
    p.add_argument("--large", action="store_true",
                   help="OpenBLAS against _narrowgemm.h's loops for a large A (machines without "
                   "AVX-512): its panels for A B, its packed loop (5-32 columns) and long dot products for "
                   "A^T B, on the shapes "
                   "with an A of 2^18 elements or more and up to 48 columns")
    p.add_argument("--big", action="store_true",
                   help="the paths gemm takes without _biggemm.h against its blocked loop (machines with "
                   "AVX-512), on A B and A B^T with every side large (use --ops NN,NT)")
    p.add_argument("--prefetch", action="store_true",
                   help="dyn's A B kernel with A's row panels fetched one ahead against two ahead "
                   "(what AMD processors take at 8 columns and more), on a softmax's 10,000 x 256 A "
                   "flushed from the caches and an LSTM's 1,024 x 256 in them, 2-64 columns")
    args = p.parse_args(argv)
    if args.cols + args.narrow + args.large + args.prefetch + args.big > 1:
        p.error("one of --cols, --narrow, --large, --prefetch and --big")
    if args.big:
        if not blas.wide_kernels():
            p.error("--big: _biggemm.h's loop needs AVX-512, which this machine lacks")
        ops = [op for op in args.ops.split(",") if op != "TN"] or p.error("--big: NN or NT")
        big_grid(ops, args.quick, 0.01 if args.quick else max(args.time, 0.1))
        return
    if args.prefetch:
        if not blas.wide_kernels():
            p.error("--prefetch: dyn's A B kernel needs AVX-512, which this machine lacks")
        prefetch_grid(args.quick)
        return
    rng = np.random.default_rng(0)
    shapes = QUICK if args.quick else SHAPES
    if args.narrow and not args.quick:
        shapes = {op: shapes[op] + NARROW_EXTRA.get(op, []) for op in shapes}
    own = "cols" if args.cols else "narrow" if args.narrow else None
    widest = 16 if args.cols else 48 if args.large else 64 if args.narrow else 32
    budget = 0.01 if args.quick else args.time
    print(f"{'op':4} {'m':>6} {'n':>4} {'k':>6}  {'OpenBLAS us':>11} {'dyn us':>9} {'ratio':>6}  "
          "auto  rel.err")
    for op in args.ops.split(","):
        if (own or args.large) and op == "NT":
            continue
        for m, n, k in shapes[op]:
            # --large: A^T B of 5-32 columns through the packed loop, the rest through the long one
            mine = ({"NN": "panels", "TN": "packed" if 5 <= n <= 32 else "long"}[op] if args.large
                    else own)
            if mine and n > widest or args.large and (m * k < 1 << 18 or n < 2):
                continue
            if op == "NT" and not mine and blas._skinny_path(op, m, n, k) == "nt-tall":
                mine = "nt-tall"    # the tall A B^T loop where gemm takes it (AMD with AVX-512)
            b, d, err = compare(op, m, n, k, budget, rng, mine)
            auto = blas._skinny_path(op, m, n, k)
            print(f"{op:4} {m:6d} {n:4d} {k:6d}  {b * 1e6:11.1f} {d * 1e6:9.1f} {b / d:6.2f}  "
                  f"{auto:4}  {err:.1e}", flush=True)


if __name__ == "__main__":
    main()
