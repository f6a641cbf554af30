"""MPI data parallelism on the BiLSTM tagger: K ranks against one process, same examples, one run.

Runs examples/mpi_tagger.py as one process on global batches of K x B
sentences and as ``mpiexec -n K`` ranks on B sentences each: the same
examples in the same order, so the same training (the parameters of the two
runs are compared, to float32 rounding). The runs alternate (1, K, 1, K ...)
so that a change of load on the machine hits both; the table gives the
median and best words/s of each, the speed-up (median over median), the
dev accuracy and the largest parameter difference. Timing covers training
only (dev is evaluated after it).

    python bench/parallel_mpi.py [DATA] [--ranks 2] [--batch 16] [--limit N] [--repeat 3] [--out FILE]
    python bench/parallel_mpi.py --quick          # 1500 sentences, 1 repeat (a smoke test)

Single-threaded BLAS in every process (OPENBLAS/OMP_NUM_THREADS=1): on a
machine of C cores, K <= C ranks measure the MPI speed-up, more measure
oversubscription.
"""

from __future__ import annotations

import os
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(REPO, "examples", "mpi_tagger.py")
sys.path.insert(0, REPO)  # this checkout's dyn, as the runs use

from parallel import (  # noqa: E402  (bench/parallel.py: the same runner and command line)
    add_run_arguments,
    apply_quick,
    footer,
    median,
    parser,
    run_example,
    write_table,
)

from dyn.parallel._mpi import find_mpiexec  # noqa: E402


def run_once(ranks, batch, args, workdir, tag):
    """One training run; returns the figures rank 0 wrote, with the saved model's path."""
    out, model = os.path.join(workdir, tag + ".json"), os.path.join(workdir, tag + ".safetensors")
    cmd = [
        sys.executable,
        EXAMPLE,
        "--batch",
        str(batch),
        "--epochs",
        str(args.epochs),
        "--json",
        out,
        "--save",
        model,
        "--seed",
        str(args.seed),
    ]
    if ranks > 1:
        cmd = [args.mpiexec, "-n", str(ranks)] + cmd
    figures = run_example(cmd, args, out, "bench/parallel_mpi.py")
    figures["model"] = model
    print(
        "  %-8s %8.0f words/s  %6.2f s  dev acc %.4f  loss %.4f"
        % (tag, figures["words_per_s"], figures["seconds"], figures["dev_acc"], figures["train_loss"]),
        flush=True,
    )
    return figures


def max_param_difference(path_a, path_b):
    from dyn.io import _safetensors

    a, _ = _safetensors.read(path_a)
    b, _ = _safetensors.read(path_b)
    if sorted(a) != sorted(b):
        raise ValueError("the two runs saved different parameters: %s vs %s" % (sorted(a), sorted(b)))
    return max(float(abs(a[k].astype("float64") - b[k]).max()) for k in a)


def table(args, single, multi, diff):
    k, b = args.ranks, args.batch
    s_med, m_med = median([r["words_per_s"] for r in single]), median([r["words_per_s"] for r in multi])
    rows = [("1 process, batch %d" % (k * b), single), ("%d MPI ranks, batch %d each" % (k, b), multi)]
    lines = [
        "| run | words/s (median) | words/s (best) | train loss | dev acc |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, runs in rows:
        lines.append(
            "| %s | %.0f | %.0f | %.4f | %.4f |"
            % (
                name,
                median([r["words_per_s"] for r in runs]),
                max(r["words_per_s"] for r in runs),
                runs[-1]["train_loss"],
                runs[-1]["dev_acc"],
            )
        )
    r0 = single[0]
    lines += [
        "",
        "speed-up (median words/s, %d ranks over 1 process): **%.2fx**" % (k, m_med / s_med),
        "largest parameter difference between the two runs: %.2g (float32)" % diff,
        "",
        footer(r0, args, "%d steps of %d sentences" % (r0["steps"], k * b), args.mpi_version),
    ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--batch", type=int, default=16, help="sentences per rank per step")
    add_run_arguments(p, "runs of each kind, alternating", "1500 sentences, 300 dev, 1 repeat")
    args = p.parse_args(argv)
    apply_quick(args)
    args.mpiexec = find_mpiexec()
    if args.mpiexec is None:
        sys.exit("bench/parallel_mpi.py: no mpiexec/mpirun found (pip install 'dyn[mpi]' installs MPICH's)")
    try:
        from mpi4py import MPI  # noqa: F401  (only to name the MPI in the table; the runs import their own)

        args.mpi_version = MPI.Get_library_version().splitlines()[0].strip()
    except ImportError:
        sys.exit("bench/parallel_mpi.py: mpi4py is not installed (pip install 'dyn[mpi]')")
    single, multi = [], []
    with tempfile.TemporaryDirectory() as workdir:
        for i in range(args.repeat):
            print("repeat %d of %d" % (i + 1, args.repeat), flush=True)
            single.append(run_once(1, args.ranks * args.batch, args, workdir, "single%d" % i))
            multi.append(run_once(args.ranks, args.batch, args, workdir, "mpi%d" % i))
        diff = max_param_difference(single[-1]["model"], multi[-1]["model"])
    write_table(table(args, single, multi, diff), args.out)


if __name__ == "__main__":
    main()
