"""Cost of a sparse lookup-table update against the table size.

Each step looks up a batch of B uniformly drawn rows of an N-row table,
back-propagates, and updates. With sparse updates a step costs the rows it
touched; for rules that move idle rows (momentum, Adam ...) that includes
bringing each touched row up to date from its last step (the catch-up), so
the figures below are the whole step, split into the part before update()
(graph, lookups with their catch-up, backward) and update() itself.
Dense updates (set_sparse_updates(False)) are shown for scale.

    OPENBLAS_NUM_THREADS=1 python bench/sparse_update.py [--dim 64] [--batch 64]
    python bench/sparse_update.py --quick      # 10k and 100k rows only: under 1 GB

Memory: every table the run creates stays allocated until the process ends (the
parameters of one float type share one pool), so the peak is about
6 trainers x 4 arrays (values, gradients, two moments) x 4 bytes x dim x the
sum of --sizes: about 6.4 GB at the default sizes (10k, 100k and 1M rows of
dim 64), 0.8 GB with --quick. The script prints its estimate before it starts.
"""

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import dyn as dy  # noqa: E402

TRAINERS = [
    ("SimpleSGD", lambda m: dy.SimpleSGDTrainer(m, 0.1), True),
    ("MomentumSGD", lambda m: dy.MomentumSGDTrainer(m, 0.01), True),
    ("Adam (exact sparse)", lambda m: dy.AdamTrainer(m, 0.001), True),
    ("Adam (DyNet approx.)", lambda m: dy.AdamTrainer(m, 0.001), "approx"),
    ("Adam + weight decay", lambda m: dy.AdamTrainer(m, 0.001), "wd"),
    ("Adam (dense)", lambda m: dy.AdamTrainer(m, 0.001), False),
]


def run(rows, dim, batch, make, mode, steps, rng):
    m = dy.ParameterCollection()
    E = m.add_lookup_parameters((rows, dim), init=dy.ConstInitializer(0.1))
    if mode == "wd":
        m.set_weight_decay(1e-4)
    t = make(m)
    t.set_clip_threshold(-1)
    t.set_sparse_updates(mode is not False, exact=mode != "approx")
    before = upd = 0.0
    for i in range(steps + 10):
        ids = rng.randint(0, rows, batch)
        t0 = time.perf_counter()
        dy.renew_cg()
        loss = dy.sum_batches(dy.squared_norm(E.batch(ids)))
        loss.backward()
        t1 = time.perf_counter()
        t.update()
        t2 = time.perf_counter()
        if i >= 10:  # warm-up
            before += t1 - t0
            upd += t2 - t1
    t0 = time.perf_counter()
    E.as_array()  # brings every idle row up to date
    read = time.perf_counter() - t0
    return 1e3 * before / steps, 1e3 * upd / steps, read


def memory_estimate(sizes, dim):
    """Peak bytes of a run: every table stays in the pool (see the module docstring), plus the
    interpreter, numpy and dyn (about 150 MB)."""
    return len(TRAINERS) * 3.7 * 4 * dim * sum(sizes) + 150e6


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="Memory: about 6.4 GB at the default sizes, 0.8 GB with --quick (every table the run "
        "creates stays allocated; the estimate is printed first).",
    )
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument(
        "--sizes", default="10000,100000,1000000", help="table rows, comma-separated (default: %(default)s)"
    )
    ap.add_argument("--quick", action="store_true", help="tables of 10k and 100k rows only (under 1 GB)")
    args = ap.parse_args()
    if args.quick:
        args.sizes = "10000,100000"
    sizes = [int(s) for s in args.sizes.split(",")]
    print("memory needed: about %.1f GB" % (memory_estimate(sizes, args.dim) / 1e9))
    print("per-update time (ms), batch of %d rows of dim %d, float32, 1 thread" % (args.batch, args.dim))
    print("%-22s" % "trainer" + "".join("%24s" % ("%d rows" % n) for n in sizes))
    print("%-22s" % "" + "".join("%24s" % "before + update = step" for _ in sizes))
    reads = []
    for name, make, mode in TRAINERS:
        cells = []
        for n in sizes:
            steps = args.steps if mode is not False else max(3, min(args.steps, 3_000_000 // n))
            b, u, r = run(n, args.dim, args.batch, make, mode, steps, np.random.RandomState(0))
            cells.append("%7.3f + %6.3f = %6.3f" % (b, u, b + u))
            if mode is True and name.startswith("Adam"):
                reads.append((n, r))
        print("%-22s" % name + "".join("%24s" % c for c in cells), flush=True)
    print()
    for n, r in reads:
        print(
            "Adam, exact: first E.as_array() after training, %d rows (catches every idle row up): %.3f s"
            % (n, r)
        )


if __name__ == "__main__":
    main()
