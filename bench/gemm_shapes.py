"""float32 matrix products with one small side: dyn's register-blocked kernels against OpenBLAS.

For each shape, C = A B (A m x k, B k x n) and C = A^T B (A k x m), both with beta = 1 as in a
gradient's accumulation, run through OpenBLAS's sgemm and through dyn/_core/cpu/_skinnygemm.h,
alternating, three rounds; the time of each is the median round, and ``ratio`` is OpenBLAS's
time over dyn's (above 1: dyn's kernel is faster). ``auto`` is the path dyn's gemm takes for the
shape (dyn/_core/cpu/blas.pyx's _skinny thresholds, which come from this grid). The shapes are
those of the paper's tasks: a 10k softmax over a sentence's steps (n = its length), an LSTM
step's gate product over a minibatch (n = its size), and smaller per-example layers.

    python bench/gemm_shapes.py [--time S] [--quick]
"""

import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from dyn._core.cpu import blas  # noqa: E402

SHAPES = (
    [(10000, 256, n) for n in (1, 2, 4, 8, 16, 22, 32, 48)]
    + [(1024, 256, n) for n in (1, 2, 4, 8, 16, 24, 32, 64)]
    + [(512, 128, n) for n in (1, 2, 4, 8, 16, 32)]
    + [(256, 64, n) for n in (2, 4, 8, 16, 32)]
    + [(128, 64, n) for n in (2, 4, 8, 16, 32)]
    + [(64, 32, n) for n in (4, 16, 25)]
)
QUICK = [(10000, 256, 22), (1024, 256, 16), (256, 64, 8)]


def timed(path, ta, A, B, C, budget):
    """Seconds per call of one path, with enough calls to fill budget seconds."""
    per = blas._gemm(path, ta, A, B, 1.0, 1.0, C, 1)
    reps = max(1, int(budget / max(per, 1e-7)))
    return blas._gemm(path, ta, A, B, 1.0, 1.0, C, reps)


def compare(ta, m, k, n, budget, rng):
    A = np.asfortranarray(rng.standard_normal((m, k) if ta == "N" else (k, m), dtype=np.float32))
    B = np.asfortranarray(rng.standard_normal((k, n), dtype=np.float32))
    C0 = np.asfortranarray(rng.standard_normal((m, n), dtype=np.float32))
    own = "nn" if ta == "N" else "tn"
    ref, got = C0.copy(order="F"), C0.copy(order="F")
    blas._gemm("blas", ta, A, B, 1.0, 1.0, ref)
    blas._gemm(own, ta, A, B, 1.0, 1.0, got)
    err = float(np.abs(ref - got).max() / max(np.abs(ref).max(), 1e-30))
    rounds = []
    C = C0.copy(order="F")
    for _ in range(3):
        b = timed("blas", ta, A, B, C, budget)
        d = timed(own, ta, A, B, C, budget)
        rounds.append((b, d))
    b = sorted(r[0] for r in rounds)[1]
    d = sorted(r[1] for r in rounds)[1]
    return b, d, err


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--time", type=float, default=0.05, help="seconds per path per round and shape")
    p.add_argument("--quick", action="store_true", help="three shapes, short runs")
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    shapes = QUICK if args.quick else SHAPES
    budget = 0.01 if args.quick else args.time
    print(f"{'op':4} {'m':>6} {'k':>6} {'n':>4}  {'OpenBLAS us':>11} {'dyn us':>9} {'ratio':>6}  "
          "auto  rel.err")
    for ta in ("N", "T"):
        for big, small, n in shapes:
            # A B: the large matrix is m x k; A^T B: the long dimension is the inner one
            m, k = (big, small) if ta == "N" else (small, big)
            b, d, err = compare(ta, m, k, n, budget, rng)
            auto = blas._skinny_path(ta, "N", m, n, k)
            op = "AB" if ta == "N" else "AtB"
            print(f"{op:4} {m:6d} {k:6d} {n:4d}  {b * 1e6:11.1f} {d * 1e6:9.1f} {b / d:6.2f}  "
                  f"{auto:4}  {err:.1e}", flush=True)


if __name__ == "__main__":
    main()
