"""Which matrix products a benchmark task runs, and how long each shape takes, in training.

Runs one of bench/tasks' programs (its own arguments after the task's name) with dyn's product
trace on during its training steps only (not its startup or dev evaluation): every float32
product gemm and gemv run is counted by shape and by the path dyn's dispatch took for it (its
own kernels or OpenBLAS: dyn/_core/cpu/blas.pyx), timed with the processor's tick counter.
Prints the shapes that took the most time, per training item (sentence, tree or minibatch),
and what share of the training time all products took.

    python bench/gemm_trace.py treelstm --sparse --time 10 [--top 25]
    python bench/gemm_trace.py bilstm_tagger --sparse --time 10
"""

import os
import runpy
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "tasks"))

import common  # noqa: E402  (the tasks' shared loop, wrapped below)

TASKS = ("bilstm_tagger", "bilstm_tagger_char", "treelstm", "rnnlm", "tagger_handbatched")


def main():
    argv = sys.argv[1:]
    top = 25
    if "--top" in argv:
        i = argv.index("--top")
        top = int(argv[i + 1])
        del argv[i:i + 2]
    if not argv or argv[0] not in TASKS:
        raise SystemExit("usage: python bench/gemm_trace.py TASK [task arguments] [--top N]; TASK one of "
                         + ", ".join(TASKS))
    task, rest = argv[0], argv[1:]
    from dyn._core.cpu import blas

    seen = {"items": 0, "time": 0.0}
    loop = common.train_loop

    def traced_loop(args, train, step, evaluate, unit, batches=None, phases=None):
        def traced_step(item):
            old = blas._trace(True)
            t0 = time.perf_counter()
            try:
                return step(item)
            finally:
                seen["time"] += time.perf_counter() - t0
                seen["items"] += 1
                blas._trace(old)
        return loop(args, train, traced_step, evaluate, unit, batches=batches, phases=phases)

    common.train_loop = traced_loop
    blas._trace(False)
    blas._trace_reset()
    sys.argv = [os.path.join(HERE, "tasks", task + ".py")] + rest
    runpy.run_path(sys.argv[0], run_name="__main__")
    rows, lost = blas._trace_table()
    n, total = max(seen["items"], 1), max(seen["time"], 1e-12)
    rows.sort(key=lambda r: -r[7])
    spent = sum(r[7] for r in rows)
    print("\n# products in training: %d items, %.1f s of steps, products %.1f%% of it (%.1f us an item)"
          % (seen["items"], total, 100 * spent / total, 1e6 * spent / n))
    print("%-7s %6s %6s %6s %-9s %10s %9s %9s %7s" % ("op", "m", "n", "k", "path", "calls/item", "us/call",
                                                      "us/item", "share"))
    for op, m, nn, k, path, dtype, calls, secs in rows[:top]:
        print("%-7s %6d %6d %6d %-9s %10.2f %9.2f %9.2f %6.1f%%" % (
            op + ("" if dtype == "float32" else " f64"), m, nn, k, path, calls / n, 1e6 * secs / calls,
            1e6 * secs / n, 100 * secs / total))
    if lost:
        print("(%d calls of further shapes not counted: the trace's table was full)" % lost)


if __name__ == "__main__":
    main()
