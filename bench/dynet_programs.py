"""DyNet's own Python programs run on dyn, on the CPU and on the GPU, and their printed results
compared: the examples of a DyNet source checkout (github.com/clab/dynet) and its unit tests
(tests/python/test.py), each run unchanged through a `dynet` module that is dyn.

    python bench/dynet_programs.py DYNET_SRC [--devices CPU,GPU:0] [--timeout 120] [--out F.md]

DYNET_SRC is a DyNet checkout (nothing of it is copied here). Every program runs on each device
in its own process, all at once, with a fixed seed (the `dynet` module seeds dyn), and the GPU
chosen as DyNet users choose it: `--dynet-gpus 1` on the command line where the program leaves
its arguments alone, the DYN_DEVICE environment variable where it parses its own. The numbers
each program prints (losses, values; not its sampled text) are compared line by line over the
lines both runs printed before the time limit: they agree when they differ by no more than a
relative tolerance, or than the CPU's float32 run differs from its float64 run (a third run: how
far float32 arithmetic alone moves the program's numbers through many training steps). The unit
tests: every test that passes on the CPU must pass on the GPU.

Data: the RNN LMs read the first 200 lines of the Penn Treebank (DATA/ptb/ptb.train.txt).
xor-multidevice.py asks for GPU:1; on a one-GPU machine GPU:1 is replaced by GPU:0 (on the CPU
run every device is CPU): the one edit made to a program. Not run: the tagger (it prints its
first figure after 5,000 sentences of WSJ), the MNIST examples (no MNIST here), lstmlm-auto.py
(Python 2), cpu_vs_gpu.py (DyNet's C++ module), and the programs of DyNet's other folders.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "tasks"))

# name, program (under the checkout), arguments, whether the program leaves sys.argv alone
PROGRAMS = [
    ("tests/python", "tests/python/test.py", [], False),
    ("xor", "examples/xor/xor.py", [], True),
    ("xor-multidevice", "examples/devices/xor-multidevice.py", [], True),
    ("minibatch", "examples/batching/minibatch.py", [], True),
    ("attention", "examples/sequence-to-sequence/attention.py", [], True),
    ("rnnlm", "examples/rnnlm/rnnlm.py", ["{corpus}"], False),
    ("rnnlm_transduce", "examples/rnnlm/rnnlm_transduce.py", ["{corpus}"], False),
    ("rnnlm-batch", "examples/batching/rnnlm-batch.py", ["{corpus}"], False),
]

SHIM = '''import os, random, sys
import numpy
import dyn
sys.modules["dynet"] = dyn
_seed = int(os.environ.get("DYNET_PROGRAMS_SEED", "1"))
dyn.init(random_seed=_seed)
random.seed(_seed)          # the programs shuffle and sample with Python's and numpy's generators
numpy.random.seed(_seed)
'''

NUM = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf")
LABELS = re.compile(r"loss|iter|epoch|tt|ft|tf|ff|lr|clips|updates|[\[\]():=,]", re.I)


def numbers(text):
    """The numeric lines of a program's output: lines whose words are numbers and labels."""
    out = []
    for line in text.splitlines():
        rest = LABELS.sub(" ", NUM.sub(" ", line))
        if rest.strip() == "" and NUM.search(line):
            out.append([float(x) for x in NUM.findall(line)])
    return out


def prepare(work, src, data):
    """The work folder: the dynet module, the data, and the programs (xor-multidevice's GPU:1
    edited as the docstring says)."""
    os.makedirs(os.path.join(work, "shim"), exist_ok=True)
    with open(os.path.join(work, "shim", "dynet.py"), "w") as f:
        f.write(SHIM)
    with open(os.path.join(data, "ptb", "ptb.train.txt")) as f:
        lines = [next(f) for _ in range(200)]
    with open(os.path.join(work, "corpus.txt"), "w") as f:
        f.writelines(lines)
    progs = {}
    for name, rel, _, _ in PROGRAMS:
        with open(os.path.join(src, rel)) as f:
            code = f.read()
        variants = {"CPU": code, "GPU": code}
        if name == "xor-multidevice":
            variants = {"CPU": re.sub(r'"GPU:\d"', '"CPU"', code),
                        "GPU": code.replace('"GPU:1"', '"GPU:0"')}
        for dev, c in variants.items():
            path = os.path.join(work, "%s_%s.py" % (re.sub(r"\W", "_", name), dev))
            with open(path, "w") as f:
                f.write(c)
            progs[name, dev] = path
    return progs


def start(work, src, progs, name, argv_ok, args, device):
    """Start one run; device "CPU64" is the CPU in float64 (the reference for how far float32
    arithmetic alone moves a program's numbers)."""
    dev = "CPU" if device.startswith("CPU") else "GPU"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(work, "shim"), os.path.join(src, "examples", "python-utils"), REPO]),
        OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    env.pop("DYN_DEVICE", None)
    env.pop("DYN_PRECISION", None)
    if device == "CPU64":
        env["DYN_PRECISION"] = "float64"
    extra = []
    if dev == "GPU":
        if argv_ok:
            extra = ["--dynet-gpus", "1"]
        else:
            env["DYN_DEVICE"] = device
    args = [a.format(corpus=os.path.join(work, "corpus.txt")) for a in args]
    if name == "tests/python":
        cmd = [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", progs[name, dev]]
    else:
        cmd = [sys.executable, progs[name, dev]] + args + extra
    run_dir = os.path.join(work, "run_%s_%s" % (name.replace("/", "_"), device.replace(":", "")))
    os.makedirs(run_dir, exist_ok=True)
    out = open(os.path.join(run_dir, "stdout.txt"), "w")
    err = open(os.path.join(run_dir, "stderr.txt"), "w")
    return subprocess.Popen(cmd, cwd=work if name != "tests/python" else run_dir, env=env, stdout=out,
                            stderr=err), run_dir


def finish(proc, run_dir, deadline):
    try:
        rc = proc.wait(timeout=max(1.0, deadline - time.time()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        rc = "timeout"
    with open(os.path.join(run_dir, "stdout.txt")) as f:
        out = f.read()
    with open(os.path.join(run_dir, "stderr.txt")) as f:
        err = f.read()
    return rc, out, err


def unit_results(out):
    res = {}
    for line in out.splitlines():
        m = re.match(r"(PASSED|FAILED|ERROR) (\S+)", line)
        if m:
            res[m.group(2).split("::", 1)[-1]] = m.group(1)
    return res


def rel_diff(a_lines, b_lines):
    """Largest relative difference between the numbers of two runs' common lines (None: a line's
    numbers differ in count)."""
    worst = 0.0
    for a, b in zip(a_lines, b_lines):
        if len(a) != len(b):
            return None
        for x, y in zip(a, b):
            worst = max(worst, abs(x - y) / max(abs(x), abs(y), 1e-3))
    return worst


def compare(name, cpu, gpu, cpu64, rtol):
    """One table row: (verdict, details). The GPU's numbers are the CPU's when they differ by no
    more than rtol, or than the CPU's own float32 numbers differ from its float64 ones (what
    float32 arithmetic alone does to this program)."""
    (crc, cout, cerr), (grc, gout, gerr) = cpu, gpu
    if name == "tests/python":
        c, g = unit_results(cout), unit_results(gout)
        passed_c = {k for k, v in c.items() if v == "PASSED"}
        lost = sorted(k for k in passed_c if g.get(k) != "PASSED")
        verdict = "same" if passed_c and not lost else "DIFFERENT"
        detail = "CPU %d passed of %d, GPU %d passed of %d" % (
            len(passed_c), len(c), sum(v == "PASSED" for v in g.values()), len(g))
        if lost:
            detail += "; passing on the CPU only: " + ", ".join(lost[:5])
        return verdict, detail
    for dev, rc, err in (("CPU", crc, cerr), ("GPU", grc, gerr)):
        if rc not in (0, "timeout"):
            last = err.strip().splitlines()[-1] if err.strip() else "no output"
            return "FAILED", "%s exit %s: %s" % (dev, rc, last[:200])
    cn, gn = numbers(cout), numbers(gout)
    n = min(len(cn), len(gn))
    if n == 0:
        return "NO OUTPUT", "numeric lines: CPU %d, GPU %d" % (len(cn), len(gn))
    worst = rel_diff(cn[:n], gn[:n])
    if worst is None:
        return "DIFFERENT", "a line's numbers differ in count"
    dn = numbers(cpu64[1]) if cpu64 is not None else []
    spread = rel_diff(cn[:min(n, len(dn))], dn[:n]) if dn else None
    ok = worst <= rtol or (spread is not None and worst <= spread)
    state = ("both finished" if crc == 0 and grc == 0 else "the GPU run stopped at the time limit"
             if grc == "timeout" else "the CPU run stopped at the time limit")
    return "same" if ok else "DIFFERENT", (
        "%d numeric lines compared (CPU printed %d, GPU %d; %s); largest relative difference %.2g "
        "(CPU float32 vs float64 on %d of those lines: %s)"
        % (n, len(cn), len(gn), state, worst, min(n, len(dn)), "-" if spread is None else "%.2g" % spread))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dynet_src")
    p.add_argument("--data", default=None)
    p.add_argument("--device", default="GPU:0")
    p.add_argument("--only", default="")
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--work", default=None)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    args.dynet_src = os.path.abspath(args.dynet_src)
    import common
    data = args.data or common.default_data_dir()
    work = args.work or tempfile.mkdtemp(prefix="dynet_programs_")
    progs = prepare(work, args.dynet_src, data)
    chosen = [pr for pr in PROGRAMS if not args.only or pr[0] in args.only.split(",")]
    deadline = time.time() + args.timeout
    running = {}
    for name, _, pargs, argv_ok in chosen:
        for device in ("CPU", args.device) + (("CPU64",) if name != "tests/python" else ()):
            running[name, device] = start(work, args.dynet_src, progs, name, argv_ok, pargs, device)
    rows, ok = [], True
    for name, _, _, _ in chosen:
        cpu = finish(*running[name, "CPU"], deadline)
        gpu = finish(*running[name, args.device], deadline)
        cpu64 = finish(*running[name, "CPU64"], deadline) if (name, "CPU64") in running else None
        verdict, detail = compare(name, cpu, gpu, cpu64, args.rtol)
        ok = ok and verdict == "same"
        rows.append("| %s | %s | %s |" % (name, verdict, detail))
        print(rows[-1], flush=True)
    table = ["| program | CPU vs %s | |" % args.device, "|---|---|---|"] + rows
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(table) + "\n")
    print("work folder (each run's stdout and stderr):", work)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
