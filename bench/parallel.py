"""Worker processes on one machine: the BiLSTM tagger with 1..N workers, async and sync, one run.

Runs examples/parallel_tagger.py (the tagger of bench/tasks/bilstm_tagger.py on
wikiner-10k) as a fresh process per configuration, on the same examples:

* async (Hogwild): every worker takes ``--batch`` sentences a step and updates
  the shared parameters; the baseline is one process on the same batch size.
* sync: a global batch of ``--global-batch`` sentences a step, split over the
  workers; the baseline is one process on the global batch: the same training,
  so the same dev accuracy (to float32 rounding).

Configurations alternate within each repeat (1, 2, ..., 1, 2, ...) so that a
change of load on the machine hits all of them; the table gives the median
words/s of each, the speed-up over one process (median over median), the dev
accuracy and the training loss; ``--plot`` draws the scaling curve. Timing
covers training (from the first step to the last, worker start-up included
for N > 1), not the dev evaluation done after it.

    python bench/parallel.py [DATA] [--workers 1,2,4] [--repeat 3] [--out FILE.md] [--plot FILE.png]
    python bench/parallel.py --quick      # 1500 sentences, workers 1,2, 1 repeat (a smoke test)

Single-threaded BLAS in every process (OPENBLAS/OMP_NUM_THREADS=1): on a
machine of C cores, N <= C workers measure the speed-up, more measure
oversubscription.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(REPO, "examples", "parallel_tagger.py")


QUICK_LIMIT, QUICK_DEV_LIMIT = 1500, 300  # --quick: training and dev sentences, one repeat


def parser(description):
    """The command line's start: the data folder (as the examples take it)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "data", nargs="?", default=None, help="data folder (default: $DYN_DATA, else ../shared/data)"
    )
    return p


def add_run_arguments(p, repeat_help, quick_help):
    """The flags both parallel benches take after their own: epochs, data slices, repeats, seed,
    --quick and --out (the runs of examples/_bench_tagger.py's tagger they compare)."""
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--limit", type=int, default=None, help="the first N training sentences (default all)")
    p.add_argument("--dev-limit", type=int, default=None)
    p.add_argument("--repeat", type=int, default=3, help=repeat_help)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--quick", action="store_true", help=quick_help)
    p.add_argument("--out", default=None, help="also write the table (markdown) here")


def apply_quick(args):
    """--quick: QUICK_LIMIT training and QUICK_DEV_LIMIT dev sentences (unless given), one repeat."""
    if args.quick:
        args.limit, args.dev_limit, args.repeat = (
            args.limit or QUICK_LIMIT,
            args.dev_limit or QUICK_DEV_LIMIT,
            1,
        )
    return args.quick


def write_table(text, path):
    """Print the table and, with --out, write it to path (whole or not at all)."""
    print("\n" + text)
    if path:
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else 0.5 * (xs[len(xs) // 2 - 1] + xs[len(xs) // 2])


def run_example(cmd, args, out, who):
    """Run an example with its data arguments and single-threaded BLAS; the figures it wrote to out."""
    cmd = cmd + ([args.data] if args.data else []) + (["--limit", str(args.limit)] if args.limit else [])
    cmd += ["--dev-limit", str(args.dev_limit)] if args.dev_limit else []
    env = dict(
        os.environ,
        OPENBLAS_NUM_THREADS="1",
        OMP_NUM_THREADS="1",
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])),
    )
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(
            "%s: %s failed (%d):\n%s%s"
            % (who, " ".join(cmd), proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
        )
    with open(out) as f:
        return json.load(f)


def batch_for(mode, workers, args):
    """Sentences per worker per step: async keeps it fixed, sync splits the global batch."""
    if mode == "async":
        return args.batch
    if args.global_batch % workers:
        sys.exit(
            "bench/parallel.py: --global-batch %d does not split over %d workers"
            % (args.global_batch, workers)
        )
    return args.global_batch // workers


def run_once(mode, workers, args, workdir, tag):
    out = os.path.join(workdir, tag + ".json")
    cmd = [
        sys.executable,
        EXAMPLE,
        "--workers",
        str(workers),
        "--mode",
        mode,
        "--batch",
        str(batch_for(mode, workers, args)),
        "--epochs",
        str(args.epochs),
        "--seed",
        str(args.seed),
        "--json",
        out,
    ]
    figures = run_example(cmd, args, out, "bench/parallel.py")
    print(
        "  %-6s %d worker(s)  %8.0f words/s  %6.2f s  dev acc %.4f  loss %.4f"
        % (
            mode,
            workers,
            figures["words_per_s"],
            figures["seconds"],
            figures["dev_acc"],
            figures["train_loss"],
        ),
        flush=True,
    )
    return figures


def summarise(runs, args):
    """{(mode, workers): {"wps": median words/s, "speedup", "dev_acc", "loss", "runs"}}."""
    out = {}
    for (mode, workers), rs in runs.items():
        out[mode, workers] = {
            "wps": median([r["words_per_s"] for r in rs]),
            "best": max(r["words_per_s"] for r in rs),
            "dev_acc": median([r["dev_acc"] for r in rs]),
            "loss": median([r["train_loss"] for r in rs]),
            "runs": rs,
        }
    for (mode, _), s in out.items():
        s["speedup"] = s["wps"] / out[mode, 1]["wps"]
        s["dev_delta"] = 100.0 * (s["dev_acc"] - out[mode, 1]["dev_acc"])
    return out


def table(args, summary):
    lines = [
        "| mode | workers | sentences/step | words/s (median) | words/s (best) | speed-up | "
        "dev acc | dev acc - 1 process (points) | train loss |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for mode in args.modes:
        for w in args.workers:
            s = summary[mode, w]
            per = batch_for(mode, w, args)
            lines.append(
                "| %s | %d | %s | %.0f | %.0f | %.2fx | %.2f%% | %+.2f | %.4f |"
                % (
                    mode,
                    w,
                    "%d x %d" % (w, per) if w > 1 else str(per),
                    s["wps"],
                    s["best"],
                    s["speedup"],
                    100 * s["dev_acc"],
                    s["dev_delta"],
                    s["loss"],
                )
            )
    r0 = summary[args.modes[0], 1]["runs"][0]
    lines += ["", footer(r0, args, "dev %s sentences" % (args.dev_limit or "all"))]
    return "\n".join(lines) + "\n"


def footer(r0, args, detail, *extra):
    """A table's last line: the runs' size (from a run's figures), ``detail``, the repeats and the machine."""
    return "%d sentences (%d words) x %d epoch(s), %s; %d repeat(s), alternating; %s" % (
        r0["sentences"] // args.epochs,
        r0["words"] // args.epochs,
        args.epochs,
        detail,
        args.repeat,
        ", ".join(
            ["%s, %d cores, Python %s" % (platform.machine(), os.cpu_count(), platform.python_version())]
            + list(extra)
        ),
    )


def plot(args, summary, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ws = args.workers
    for mode, marker in zip(args.modes, "os"):
        ax.plot(ws, [summary[mode, w]["speedup"] for w in ws], marker=marker, label=mode)
    ax.plot(
        ws,
        [min(w, os.cpu_count()) for w in ws],
        "k--",
        linewidth=1,
        label="linear up to %d cores" % os.cpu_count(),
    )
    ax.set_xlabel("worker processes")
    ax.set_ylabel("words/s over 1 process (median)")
    ax.set_xticks(ws)
    ax.set_title("BiLSTM tagger, dyn.parallel on %d cores" % os.cpu_count())
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, path)


def main(argv=None):
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--workers", default="1,2,4", help="comma-separated worker counts (1 is added)")
    p.add_argument("--modes", default="async,sync")
    p.add_argument("--batch", type=int, default=16, help="async: sentences per worker per step")
    p.add_argument(
        "--global-batch", type=int, default=32, help="sync: sentences per step, split over workers"
    )
    add_run_arguments(p, None, "1500 sentences, 300 dev, workers 1,2, 1 repeat")
    p.add_argument("--plot", default=None, help="draw the scaling curve here (PNG; needs matplotlib)")
    args = p.parse_args(argv)
    if apply_quick(args):
        args.workers = "1,2"
    args.workers = sorted({1} | {int(w) for w in args.workers.split(",")})
    args.modes = [m.strip() for m in args.modes.split(",")]
    runs = {(m, w): [] for m in args.modes for w in args.workers}
    with tempfile.TemporaryDirectory() as workdir:
        for i in range(args.repeat):
            print("repeat %d of %d" % (i + 1, args.repeat), flush=True)
            for mode in args.modes:
                for w in args.workers:
                    runs[mode, w].append(run_once(mode, w, args, workdir, "%s%d_%d" % (mode, w, i)))
    summary = summarise(runs, args)
    write_table(table(args, summary), args.out)
    if args.plot:
        plot(args, summary, args.plot)


if __name__ == "__main__":
    main()
