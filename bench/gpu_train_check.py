"""Train the paper's tasks of bench/tasks/ on the CPU and on the GPU on the same examples (same seed,
same order, the same number of items) and compare the dev metrics and training losses.

Each run is `python bench/tasks/<task>.py DATA --quick --items N --dynet-seed 1 [--dynet-gpus 1]`:
the task program is the CPU's, unchanged; DyNet's flag moves it to the GPU. Prints one line per
task and writes a markdown table (--out). Exit status 1 when a dev metric differs by more than
--tol (absolute), a run fails, or a run trained other than N items (``--items`` ignores the time
budget, so the GPU's first, slow sentences, while cupy compiles its kernels, do not cut it short).

    python bench/gpu_train_check.py [DATA] [--items 200] [--out results.md]
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

TASKS = [
    ("BiLSTM tagger", "bilstm_tagger.py", [], "dev_acc"),
    ("BiLSTM tagger, sparse updates", "bilstm_tagger.py", ["--sparse"], "dev_acc"),
    ("Tree-LSTM", "treelstm.py", [], "dev_acc"),
    ("Tree-LSTM, autobatched", "treelstm.py", ["--dynet-autobatch", "1"], "dev_acc"),
    ("RNN LM, minibatch 16", "rnnlm.py", [], "dev_ppl"),
]


def run(data, script, extra, items, gpu, timeout):
    cmd = [sys.executable, os.path.join(HERE, "tasks", script)] + ([data] if data else []) + [
        "--quick", "--items", str(items), "--dynet-seed", "1"] + extra
    if gpu:
        cmd += ["--dynet-gpus", "1"]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONPATH=REPO)
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO)
    wall = time.time() - t0
    if r.returncode != 0:
        return None, wall, (r.stderr or r.stdout)[-2000:]
    out = r.stdout.split("# final")[-1]
    kv = dict(line.split("=", 1) for line in out.split() if "=" in line)
    losses = [line.split("=", 1)[1] for line in r.stdout.split() if line.startswith("train_loss=")]
    kv["train_loss"] = losses[-1] if losses else "nan"
    return kv, wall, ""


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data", nargs="?", default=None)
    p.add_argument("--items", type=int, default=200)
    p.add_argument("--tol", type=float, default=0.02, help="largest dev-metric difference (absolute; "
                   "perplexity: relative)")
    p.add_argument("--timeout", type=float, default=400)
    p.add_argument("--only", default="")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    rows, ok = [], True
    for name, script, extra, metric in TASKS:
        if args.only and args.only not in name:
            continue
        res = {}
        for dev in ("CPU", "GPU"):
            kv, wall, err = run(args.data, script, extra, args.items, dev == "GPU", args.timeout)
            res[dev] = (kv, wall, err)
        (c, cw, ce), (g, gw, ge) = res["CPU"], res["GPU"]
        if c is None or g is None:
            ok = False
            line = "| %s | failed | %s |" % (name, (ce or ge).strip().splitlines()[-1] if (ce or ge) else "")
            print(name, "FAILED\n", ce, ge)
        else:
            ci, gi = int(c.get("items", -1)), int(g.get("items", -1))
            if not ci == gi == args.items:      # compared only on the same examples
                ok = False
                line = "| %s | CPU %d, GPU %d of %d | items trained differ: not compared |" % (
                    name, ci, gi, args.items)
                print(line, flush=True)
                rows.append(line)
                continue
            cm, gm = float(c[metric]), float(g[metric])
            cl, gl = float(c["train_loss"]), float(g["train_loss"])
            diff = abs(cm - gm) / (cm if metric == "dev_ppl" else 1.0)
            ldiff = abs(cl - gl) / max(abs(cl), 1e-12)
            good = diff <= args.tol and ldiff <= args.tol
            ok = ok and good
            line = ("| %s | %d | %s %.4f, train loss %.5f | %s %.4f, train loss %.5f | %.2g, %.2g | %s "
                    "| %.1f s | %.1f s |") % (name, args.items, metric, cm, cl, metric, gm, gl, diff, ldiff,
                                              "same" if good else "DIFFERENT", cw, gw)
            print(line, flush=True)
        rows.append(line)
    table = ["| task | items | CPU | GPU | difference (dev, loss) | | CPU wall | GPU wall |",
             "|---|---|---|---|---|---|---|---|"] + rows
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(table) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
