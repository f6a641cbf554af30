"""dyn and DyNet after the same training examples: dev accuracy or perplexity, and training loss.

Speed bought with different maths would show here: each of the paper's tasks (bench/tasks/) runs on
dyn and on DyNet (``--toolkit dynet``, the same program) for exactly ``--items`` training items
(sentences, trees or minibatches), in the same order (the task's ``--seed`` shuffles its data), and
then evaluates on the dev set. Each toolkit's random generator is seeded too (``--dynet-seed``), but
the two draw their initial weights differently, so their figures differ by what a change of seed
does; each task runs with several seeds to show that spread. Prints a Markdown table (and writes it to --out).

    python bench/same_items.py --dynet-python dynet-venv/bin/python [--seeds 1,2,3] [--scale 1.0]
    python bench/same_items.py --only "rnnlm --minibatch 16" --seeds 1

DyNet is built as docs/benchmarks.md says; without it only dyn's column is filled.
"""

import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

# each configuration and the items it trains (about 10-30 s for DyNet on one core)
TASKS = [
    ("bilstm_tagger", 8000),
    ("bilstm_tagger --sparse", 8000),
    ("bilstm_tagger_char", 4000),
    ("bilstm_tagger_char --sparse", 4000),
    ("treelstm", 3000),
    ("treelstm --sparse", 6000),
    ("rnnlm --minibatch 1", 1000),
    ("rnnlm --minibatch 16", 250),
    ("rnnlm --minibatch 64", 80),
]


def run(python, toolkit, config, items, seed, data):
    """The task's key=value output (the last value of each key) after training exactly `items` items
    on `toolkit` ("dyn" or "dynet") with `python`, or {"error": ...}."""
    parts = config.split()
    cmd = [python, os.path.join(HERE, "tasks", parts[0] + ".py")] + ([data] if data else []) + parts[1:]
    cmd += ["--items", str(items), "--seed", str(seed), "--dynet-seed", str(seed), "--toolkit", toolkit]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env, timeout=3600)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["rc=%d" % proc.returncode])[-1]}
    kv = {}
    for line in proc.stdout.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            kv[k] = v
    return kv


def metric(kv):
    """(name, value) of the run's dev metric, or (None, None)."""
    for k, name in (("dev_acc", "acc"), ("dev_ppl", "ppl")):
        if k in kv:
            return name, float(kv[k])
    return None, None


def cell(runs):
    """'m (v1, v2, ...)': the median dev metric over the seeds that gave one, and each one's."""
    got = [metric(kv) for kv in runs]
    vals = [v for _, v in got if v is not None]
    if not vals:
        errors = [kv["error"] for kv in runs if "error" in kv]
        return "error: " + (errors[0] if errors else "no dev metric") if runs else "-"
    fmt = "%.3f" if next(name for name, v in got if v is not None) == "acc" else "%.1f"
    return fmt % statistics.median(vals) + " (" + ", ".join(fmt % v for v in vals) + ")"


def loss_cell(runs):
    vals = [float(kv["train_loss"]) for kv in runs if "train_loss" in kv]
    return "%.4f" % statistics.median(vals) if vals else "-"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data", nargs="?", default=None, help="data folder (default: the tasks' own)")
    p.add_argument("--dynet-python", default=None, help="a Python where `import dynet` works")
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--scale", type=float, default=1.0, help="multiply every task's items by this")
    p.add_argument("--only", default="", help="comma-separated configurations, e.g. 'treelstm --sparse'")
    p.add_argument("--out", default=None, help="also write the table to this file")
    a = p.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    only = [s.strip() for s in a.only.split(",") if s.strip()]
    dynet = a.dynet_python
    if dynet and subprocess.run([dynet, "-c", "import dynet"], capture_output=True).returncode != 0:
        print("note: `import dynet` fails in %s: dyn only" % dynet, file=sys.stderr)
        dynet = None
    rows = ["| task | items | dyn dev, median (per seed) | DyNet dev, median (per seed) "
            "| dyn train loss | DyNet train loss |", "|---|---|---|---|---|---|"]
    print("\n".join(rows), flush=True)
    for config, items in TASKS:
        if only and config not in only:
            continue
        n = max(1, int(items * a.scale))
        ours = [run(sys.executable, "dyn", config, n, s, a.data) for s in seeds]
        theirs = [run(dynet, "dynet", config, n, s, a.data) for s in seeds] if dynet else []
        row = "| %s | %d | %s | %s | %s | %s |" % (
            config, n, cell(ours), cell(theirs) if theirs else "-", loss_cell(ours),
            loss_cell(theirs) if theirs else "-")
        rows.append(row)
        print(row, flush=True)
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
