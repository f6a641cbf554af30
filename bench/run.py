"""Run the DyNet paper's benchmark tasks with dyn and with PyTorch (and DyNet), alternately, and tabulate.

For each task configuration (tagger, tagger with characters, Tree-LSTM, RNN LM at minibatch
1/4/16/64; dense and sparse updates) runs bench/tasks/<task>.py and then bench/peers/<task>.py
(when torch is importable), and the same bench/tasks/<task>.py on DyNet itself (--toolkit dynet;
with --dynet-python, or where this Python imports dynet), then dyn once more with --ab-compare
(every item trained with automatic batching off and on: the on/off column; --no-ab skips it), for
the same training-time budget (--rounds N: all of that N times, the order reversed every other
round, medians reported),
single-threaded by default (OMP, OpenBLAS, MKL and torch threads = 1), and reads their key=value
output. Writes, between the lines
``<!-- paper-tasks:begin -->`` and ``<!-- paper-tasks:end -->`` of --out (added at the end when
missing; the rest of the file is left as it is), the machine, a table (speeds, the ratio
dyn/PyTorch next to the project's target, startup times, the dev accuracy / perplexity each reached in
the same time) and a PNG bar chart (--chart; needs matplotlib, skipped with a note without it): the
speed ratios dyn/PyTorch (and dyn/DyNet where DyNet ran) per task and the toolkits' speeds.

--replot draws the chart again from the table already in --out, without running anything (nor
importing dyn, PyTorch or DyNet), and adds the chart's image line to the section where it is
missing; every other byte of the file stays as it was.

    python bench/run.py [--time S] [--quick] [--only rnnlm,treelstm] [--out docs/benchmarks.md]
    python bench/run.py --quick --time 2 --out /tmp/paper.md     # CI smoke test (docs untouched)
    python bench/run.py --replot [--out docs/benchmarks.md]      # the chart from the table there
"""

import argparse
import datetime
import importlib.util
import os
import platform
import re
import shlex
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BEGIN, END = "<!-- paper-tasks:begin -->", "<!-- paper-tasks:end -->"
GPU_BEGIN, GPU_END = "<!-- paper-tasks-gpu:begin -->", "<!-- paper-tasks-gpu:end -->"

CONFIGS = [
    ("bilstm_tagger", []),
    ("bilstm_tagger", ["--sparse"]),
    ("bilstm_tagger_char", []),
    ("bilstm_tagger_char", ["--sparse"]),
    ("treelstm", []),
    ("treelstm", ["--sparse"]),
    ("rnnlm", ["--minibatch", "1"]),
    ("rnnlm", ["--minibatch", "4"]),
    ("rnnlm", ["--minibatch", "16"]),
    ("rnnlm", ["--minibatch", "64"]),
    ("rnnlm", ["--minibatch", "1", "--sparse"]),
    ("rnnlm", ["--minibatch", "64", "--sparse"]),
]

# --device GPU:0: the paper's tasks as the GPU issue sets them (batch 1 unless noted; the Tree-LSTM
# also at 64 trees a graph, autobatched), each run by dyn on the GPU, PyTorch eager on the same GPU
# and dyn on the CPU
GPU_CONFIGS = [
    ("bilstm_tagger", []),
    ("bilstm_tagger", ["--sparse"]),
    ("bilstm_tagger_char", []),
    ("bilstm_tagger_char", ["--sparse"]),
    ("treelstm", []),
    ("treelstm", ["--batch", "64", "--dynet-autobatch", "1"]),
    ("rnnlm", ["--minibatch", "1"]),
    ("rnnlm", ["--minibatch", "16"]),
    ("rnnlm", ["--minibatch", "64"]),
]
GPU_BARS = {
    "bilstm_tagger": 2.0,
    "bilstm_tagger --sparse": 2.0,
    "bilstm_tagger_char": 2.0,
    "bilstm_tagger_char --sparse": 2.0,
    "treelstm": 2.0,
    "treelstm --batch 64 --dynet-autobatch 1": 3.0,
    "rnnlm --minibatch 64": 1.2,
}

# the project's targets for the speed ratio dyn / PyTorch (targets, not results)
BARS = {
    "bilstm_tagger": 6.0,
    "bilstm_tagger --sparse": 5.0,
    "bilstm_tagger_char": 6.0,
    "bilstm_tagger_char --sparse": 5.0,
    "treelstm": 8.0,
    "treelstm --sparse": 12.0,
    "rnnlm --minibatch 1": 1.2,
    "rnnlm --minibatch 64": 1.2,
}


def run_one(script, extra, args, env, python=None):
    cmd = [python or sys.executable, script] + ([args.data] if args.data else []) + extra
    cmd += ["--time", str(args.time)] + (["--quick"] if args.quick else [])
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=max(600.0, 20 * args.time)
        )
    except subprocess.TimeoutExpired:
        return {"error": "timed out"}
    out = proc.stdout.split("# final")[-1]
    kv = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    if proc.returncode != 0:
        kv["error"] = (proc.stderr.strip().splitlines() or ["rc=%d" % proc.returncode])[-1]
    return kv


def speed(kv):
    for k in ("words_per_sec", "sents_per_sec"):
        if k in kv:
            return float(kv[k]), k.split("_")[0] + "/s"
    return None, ""


def median(values):
    """The median of the values that are not None (the lower middle one of an even count), or
    None."""
    v = sorted(x for x in values if x is not None)
    return v[(len(v) - 1) // 2] if v else None


def spread(values, fmt="%.2f"):
    """' (lo–hi)' over the values that are not None when there are two or more, else ''."""
    v = [x for x in values if x is not None]
    return (" (" + fmt % min(v) + "–" + fmt % max(v) + ")") if len(v) > 1 else ""


def fmt_ratio(ratio, bar):
    if not ratio:
        return "-"
    return ("**%.2f**" if bar and ratio >= bar else "%.2f") % ratio


def quality(kv):
    if "dev_acc" in kv:
        return "acc %.3f" % float(kv["dev_acc"])
    if "dev_ppl" in kv:
        return "ppl %.1f" % float(kv["dev_ppl"])
    return kv.get("error", kv.get("skipped", "-")).replace("|", "/")


def shown_args(argv):
    """The command line for the section, without --note's text (printed as its own paragraph)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--note":
            skip = True
        elif not a.startswith("--note="):
            out.append(a)
    return shlex.join(out)


def machine(threads):
    """One line: CPU, cores, memory, Python, numpy/BLAS and torch versions."""
    cpu, mem = platform.processor() or platform.machine(), ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
        with open("/proc/meminfo", encoding="utf-8") as f:
            kb = int(next(line.split()[1] for line in f if line.startswith("MemTotal")))
        mem = ", %.0f GiB" % (kb / 2**20)
    except (OSError, StopIteration, ValueError):
        pass
    import numpy

    try:
        blas = numpy.show_config(mode="dicts")["Build Dependencies"]["blas"]
        blas = "%s %s" % (blas.get("name", ""), blas.get("version", ""))
    except Exception:  # noqa: BLE001 - older numpy: no dict mode
        blas = "BLAS"
    line = "%s (%s), %d cores%s; Linux %s; Python %s, numpy %s (%s)" % (
        cpu,
        platform.machine(),
        os.cpu_count() or 0,
        mem,
        platform.release(),
        platform.python_version(),
        numpy.__version__,
        blas.strip(),
    )
    spec = importlib.util.find_spec("torch")
    if spec is not None:
        try:
            from importlib.metadata import version

            line += ", PyTorch %s" % version("torch")
        except Exception:  # noqa: BLE001
            line += ", PyTorch"
    return line + "; %d thread(s) per run" % threads


def extent(values):
    """(lo, hi) of the values that are not None when there are two or more (the range spread()
    prints), else None."""
    v = [x for x in values if x is not None]
    return (min(v), max(v)) if len(v) > 1 else None


DYN_COLOR, DYNET_COLOR, TORCH_COLOR = "#2a7ab9", "#e0892b", "#999"


def chart(rows, path, title):
    """Bar charts of the rows: the speed ratios dyn/PyTorch (with the project's targets) and, when a
    row has DyNet's speed, dyn/DyNet; and the toolkits' speeds."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        print("note: matplotlib is not installed (pip install -e '.[bench]'): no chart written")
        return None
    dynet = any(r.get("dynet") for r in rows)
    n = len(rows)
    names = [r["name"] for r in rows][::-1]
    y = list(range(n))
    at = [n - 1 - i for i in range(n)]   # barh counts from the bottom: the table's first row on top
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13 if dynet else 12, (0.62 if dynet else 0.42) * n + 1.6),
                                   sharey=True)
    h = 0.38 if dynet else 0.8
    series = [("ratio", "ratio_range", "dyn / PyTorch", h / 2 if dynet else 0.0)]
    if dynet:
        series.append(("dn_ratio", "dn_range", "dyn / DyNet", -h / 2))
    xs, ranged = [1.0], False
    for key, span, label, dy in series:
        drawn = [(at[i], r) for i, r in enumerate(rows) if r.get(key)]
        ys, vs, drawn = [a + dy for a, _ in drawn], [r[key] for _, r in drawn], [r for _, r in drawn]
        if dynet:
            color = TORCH_COLOR if key == "ratio" else DYNET_COLOR   # the colour of the toolkit compared with
        else:
            color = [DYN_COLOR if v >= 1 else "#c0504d" for v in vs]
        ax1.barh(ys, vs, h, color=color, label=label if dynet else None)
        # --rounds: the rounds' ratios spread, on a noisy machine by more than the targets' margins
        spans = [(yy, v, r[span]) for yy, v, r in zip(ys, vs, drawn) if r.get(span)]
        if spans:
            ranged = True
            lo = [max(v - s[0], 0.0) for _, v, s in spans]
            hi = [max(s[1] - v, 0.0) for _, v, s in spans]
            ax1.errorbar([v for _, v, _ in spans], [yy for yy, _, _ in spans], xerr=[lo, hi], fmt="none",
                         ecolor="#333", elinewidth=0.8, capsize=2 if dynet else 3, zorder=2)
        for yy, v, r in zip(ys, vs, drawn):
            end = max(v, r[span][1]) if r.get(span) else v
            ax1.text(end, yy, " %.2f" % v, va="center", fontsize=7 if dynet else 8)
            xs.append(end)
    bars = [(BARS[r["name"]], a + (h / 2 if dynet else 0.0)) for a, r in zip(at, rows) if BARS.get(r["name"])]
    if bars:
        ax1.scatter([b for b, _ in bars], [yy for _, yy in bars], marker="|", s=140 if dynet else 300,
                    color="black", label="target (dyn / PyTorch)" if dynet else "target", zorder=3)
        xs += [b for b, _ in bars]
    if ranged:
        ax1.plot([], [], color="#333", lw=0.8, label="range over the rounds")
    ax1.axvline(1.0, color="grey", lw=1)
    ax1.set_xscale("log")
    # room on the right for the last bar's figure
    lo, hi = min(xs) / 1.25, max(xs) * (1.9 if dynet else 1.6)
    ax1.set_xlim(lo, hi)
    # ratios read as plain numbers: the decades alone label only 1 and 10
    ax1.set_xticks([t for t in (0.1, 0.2, 0.5, 1, 2, 3, 5, 10, 20, 30, 50, 100, 200) if lo <= t <= hi])
    ax1.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: "%g" % v))
    ax1.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax1.set_xlabel("speed ratio: dyn's speed / the other toolkit's (log)" if dynet
                   else "dyn speed / PyTorch speed (log)")
    ax1.set_yticks(y)
    ax1.set_yticklabels(names)
    if bars or dynet or ranged:
        ax1.legend(loc="lower right", fontsize=8)
    toolkits = [("dyn", "dyn", DYN_COLOR)] + ([("dynet", "DyNet", DYNET_COLOR)] if dynet else [])
    toolkits.append(("torch", "PyTorch", TORCH_COLOR))
    h = 0.8 / len(toolkits)
    for k, (key, label, color) in enumerate(toolkits):
        dy = h * ((len(toolkits) - 1) / 2 - k)
        ax2.barh([i + dy for i in y], [r.get(key) or 0 for r in rows][::-1], h, label=label, color=color)
    ax2.set_xscale("log")
    ax2.set_xlabel("training speed (words/s or sentences/s, log)")
    ax2.legend(loc="lower right", fontsize=8)
    fig.suptitle(textwrap.fill(title, 160), fontsize=10)   # a run of several rounds says so at length
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def chart_title(rows, what, date):
    """The chart's title: the toolkits in it, how long each run trained and the run's date."""
    who = "dyn vs DyNet vs PyTorch" if any(r.get("dynet") for r in rows) else "dyn vs PyTorch"
    return "DyNet paper tasks, %s: %s" % (who, ", ".join(str(x) for x in (what, date) if x))


def chart_file(args, out):
    """Where the chart goes: --chart, else beside out as <out without .md>_paper.png."""
    return os.path.abspath(args.chart or os.path.splitext(out)[0] + "_paper.png")


def chart_ref(path, out):
    """The chart's path as the markdown file out links it: relative, with forward slashes."""
    return os.path.relpath(path, os.path.dirname(os.path.abspath(out))).replace(os.sep, "/")


def image_line(rel, rows, replot=False):
    """The section's markdown line that shows the chart at rel (relative to --out)."""
    who = "DyNet and PyTorch" if any(r.get("dynet") for r in rows) else "PyTorch"
    alt = "dyn against %s on the DyNet paper's tasks" % who
    if replot:
        alt += ", the chart drawn from the table above (bench/run.py --replot)"
    return "![%s](%s)" % (alt, rel)


def write_section(out, text, begin=BEGIN, end=END):
    """Put text between the markers of out, leaving every other byte as it was (a file without
    the markers gets them at its end; a missing file is created)."""
    block = begin + "\n" + text.rstrip("\n") + "\n" + end
    old = ""
    if os.path.exists(out):
        with open(out, encoding="utf-8") as f:
            old = f.read()
    if begin in old and end in old and old.index(begin) < old.index(end):
        new = old[: old.index(begin)] + block + old[old.index(end) + len(end) :]
    elif old:
        new = old.rstrip("\n") + "\n\n" + block + "\n"
    else:
        new = block + "\n"
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(new)
    os.replace(tmp, out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "data", nargs="?", default=None, help="data folder (default: $DYN_DATA, else ../shared/data)"
    )
    p.add_argument("--time", type=float, default=60.0, help="training seconds per run")
    p.add_argument("--quick", action="store_true", help="tiny data slices, at most 5 s per run")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--only", default="", help="comma-separated task names")
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--out", default=os.path.join(REPO, "docs", "benchmarks.md"))
    p.add_argument("--chart", default=None, help="PNG path (default: <out without .md>_paper.png)")
    p.add_argument("--note", default="", help="a sentence about the run for the section (e.g. load)")
    p.add_argument("--dynet-python", default=None,
                   help="a Python where `import dynet` works (DyNet built as docs/benchmarks.md says): adds "
                   "a DyNet column, the same task programs run with --toolkit dynet (default: this Python, "
                   "if it has DyNet)")
    p.add_argument("--no-ab", action="store_true",
                   help="skip the extra dyn run per task that trains every item with automatic batching "
                   "off and on (the on/off column)")
    p.add_argument("--device", default="CPU", help="GPU:0: the tasks on the GPU against PyTorch on the "
                   "same GPU, and dyn's CPU path beside them (section paper-tasks-gpu of --out)")
    p.add_argument("--rounds", type=int, default=1,
                   help="run each configuration's toolkits this many times, one after the other, the "
                   "order reversed every other round; speeds are the medians over the rounds and each "
                   "ratio is the median of the rounds' ratios (runs minutes apart on a noisy machine), "
                   "shown with their range")
    p.add_argument("--replot", action="store_true",
                   help="run nothing: draw the chart (--chart) from the table already between the "
                   "paper-tasks markers of --out and add its image line to that section")
    args = p.parse_args(argv)
    if args.replot:
        return replot(args)
    argv = sys.argv[1:] if argv is None else argv
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(args.threads)
    # the tasks import dyn from this checkout even where it is not installed
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, env.get("PYTHONPATH", "")]))
    sys.path.insert(0, os.path.join(HERE, "tasks"))
    import common

    data = args.data or common.default_data_dir()
    common.check_data(argparse.Namespace(data=data), ["ptb", "tagging", "sst"])  # else: where data goes
    have_torch = not args.no_torch and importlib.util.find_spec("torch") is not None
    if not have_torch:
        print("note: PyTorch is not installed (or --no-torch): dyn only")
    only = set(filter(None, args.only.split(",")))
    if args.device.upper() != "CPU":
        return gpu_main(args, argv, env, have_torch, only)
    dynet_py = args.dynet_python or (sys.executable if importlib.util.find_spec("dynet") else None)
    if dynet_py:
        check = subprocess.run([dynet_py, "-c", "import dynet"], capture_output=True, text=True)
        if check.returncode != 0:
            print("note: %s cannot import dynet: no DyNet column" % dynet_py)
            dynet_py = None

    rows = []
    for task, extra in CONFIGS:
        if only and task not in only:
            continue
        name = (task + " " + " ".join(extra)).strip()
        script = os.path.join(HERE, "tasks", task + ".py")
        jobs = [("dyn", lambda: run_one(script, extra, args, env)),
                ("torch", lambda: run_one(os.path.join(HERE, "peers", task + ".py"), extra, args, env)
                 if have_torch else {}),
                ("dynet", lambda: run_one(script, extra + ["--toolkit", "dynet"], args, env, dynet_py)
                 if dynet_py else {}),
                # automatic batching off and on, every item trained both ways in one process
                ("ab", lambda: {} if args.no_ab else run_one(script, extra + ["--ab-compare"], args, env))]
        runs = {k: [] for k, _ in jobs}
        for r in range(max(1, args.rounds)):
            # odd rounds: DyNet, PyTorch, dyn, then the on/off run
            for k, job in (jobs if r % 2 == 0 else jobs[2::-1] + jobs[3:]):
                runs[k].append(job())
        rows.append(paper_row(name, runs))
        print(" | ".join(rows[-1]["cells"]), flush=True)

    out = os.path.abspath(args.out)
    chart_path = chart_file(args, out)
    what, today = run_length(args), datetime.date.today()
    drawn = chart(rows, chart_path, chart_title(rows, what, today))
    image = image_line(chart_ref(drawn, out), rows) if drawn else None
    lines = paper_section(shown_args(argv), today, machine(args.threads), what, args.note, rows, image)
    write_section(out, "\n".join(lines))
    print("wrote", out, "and " + drawn if drawn else "")
    return failures(rows)


PAPER_HEAD = ["task", "unit", "dyn", "PyTorch", "dyn/PyTorch", "bar", "DyNet", "dyn/DyNet",
              "dyn batching on/off", "startup dyn s", "startup PyTorch s", "dev dyn", "dev PyTorch"]


def paper_row(name, runs):
    """A configuration's row from its runs (for each of dyn, torch, dynet and ab, a round's key=value
    output a round, {} where it did not run): the medians, ratios and ranges, and the table's cells."""
    dyn_kv, pt_kv = runs["dyn"][0], runs["torch"][0]
    dss, pss, nss = ([speed(kv)[0] for kv in runs[k]] for k in ("dyn", "torch", "dynet"))
    unit = speed(dyn_kv)[1]
    ds, ps, ns = median(dss), median(pss), median(nss)
    abs_ = [float(kv["ab_on_off"]) if "ab_on_off" in kv else None for kv in runs["ab"]]
    ab = median(abs_)
    ratios = [d / q if d and q else None for d, q in zip(dss, pss)]
    ratio = median(ratios)
    dn_ratios = [d / q if d and q else None for d, q in zip(dss, nss)]
    dn_ratio = median(dn_ratios)
    bar = BARS.get(name)
    cells = [
        name,
        unit,
        "%.0f" % ds if ds else "-",
        "%.0f" % ps if ps else "-",
        fmt_ratio(ratio, bar) + spread(ratios),
        "≥ %g" % bar if bar else "",
        "%.0f" % ns if ns else "-",
        ("%.2f" % dn_ratio + spread(dn_ratios)) if dn_ratio else "-",
        ("%.3f" % ab + spread(abs_, "%.3f")) if ab else "-",
        "%.2f" % float(dyn_kv.get("startup_time", "nan")),
        "%.2f" % float(pt_kv.get("startup_time", "nan")) if pt_kv else "-",
        quality(dyn_kv),
        quality(pt_kv) if pt_kv else "-",
    ]
    return {"name": name, "dyn": ds, "torch": ps, "ratio": ratio, "ratio_range": extent(ratios),
            "dynet": ns, "dn_ratio": dn_ratio, "dn_range": extent(dn_ratios), "cells": cells}


def paper_section(shown, date, machine_line, what, note, rows, image=None):
    """The lines of the paper-tasks section: heading, command line and date, machine and run length,
    the note, the table and the chart's image line."""
    lines = [
        "## The DyNet paper's tasks against PyTorch (`bench/run.py`)",
        "",
        "Generated by `python bench/run.py %s` on %s (the table and chart between the"
        " `paper-tasks` markers are rewritten by each run)." % (shown, date),
        "",
        "Machine: %s. %s, dyn, PyTorch and (where its column has figures) DyNet run one after the"
        " other for each configuration, DyNet running the dyn programs themselves (`--toolkit dynet`);"
        " dev evaluation is not counted in the training time; speeds are training"
        " words (RNN LM, taggers) or sentences (Tree-LSTM) per second." % (machine_line, what),
    ]
    if note:
        lines += ["", note]
    lines += [
        "",
        "The `bar` column is the project's target for dyn/PyTorch (bold: met in this run). The dev"
        " columns are the accuracy or perplexity each toolkit reached in the same training time."
        " dyn runs at its default, automatic batching on; `dyn batching on/off` is the speed ratio of"
        " automatic batching on to off in one more run that trains every item both ways, the order"
        " alternating (`--ab-compare`).",
        "",
    ] + table(PAPER_HEAD, rows)
    if image:
        lines += ["", image]
    return lines


def section_of(text, begin=BEGIN, end=END):
    """The text between the markers (what write_section was given), or None."""
    if begin not in text or end not in text or text.index(begin) > text.index(end):
        return None
    inner = text[text.index(begin) + len(begin) : text.index(end)]
    return inner[1:] if inner.startswith("\n") else inner


def number(cell):
    """A cell's number (bold or not; a bracketed range after it is left), or None for '-' and ''."""
    m = re.match(r"\**([0-9][0-9,]*(?:\.[0-9]+)?)\**", cell.strip())
    return float(m.group(1).replace(",", "")) if m else None


def cell_range(cell):
    """The bracketed '(lo–hi)' of a cell as (lo, hi), or None."""
    m = re.search(r"\(([0-9.]+)\s*[–-]\s*([0-9.]+)\)", cell)
    return (float(m.group(1)), float(m.group(2))) if m else None


def read_table(section):
    """The rows of the section's table, as main() builds them for chart(): name, the speeds dyn,
    torch and dynet, the ratios and their ranges (None where a cell is '-' or the column is
    missing), and the cells as written."""
    lines = section.split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith("| task |")), None)
    if start is None:
        return []
    head = table_cells(lines[start])
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        # by the header's names: a table of an older run lacks some columns
        written = table_cells(line)
        cells = dict(zip(head, written))
        ratio, dn_ratio = cells.get("dyn/PyTorch", "-"), cells.get("dyn/DyNet", "-")
        rows.append({"name": cells["task"], "dyn": number(cells.get("dyn", "-")),
                     "torch": number(cells.get("PyTorch", "-")), "ratio": number(ratio),
                     "ratio_range": cell_range(ratio), "dynet": number(cells.get("DyNet", "-")),
                     "dn_ratio": number(dn_ratio), "dn_range": cell_range(dn_ratio), "cells": written})
    return rows


def table_cells(line):
    """The cells of a markdown table line that table() wrote."""
    return [c.strip() for c in line.strip()[1:-1].split("|")]


def section_run(section):
    """(run length, date) from the section's 'Generated by ... on DATE' and machine lines (None for
    what is not there)."""
    date = re.search(r"^Generated by .* on (\d{4}-\d\d-\d\d)\b", section, re.M)
    what = re.search(r"^Machine: .*? thread\(s\) per run\. (.*?), dyn, PyTorch and ", section, re.M)
    return (what.group(1) if what else None), (date.group(1) if date else None)


def with_image(section, line):
    """The section with its chart's image line (one pointing where line points) replaced by line,
    or line added at the end."""
    target = line[line.rindex("](") :]
    lines = section.rstrip("\n").split("\n")
    old = [i for i, x in enumerate(lines) if x.startswith("![") and x.endswith(target)]
    if not old:
        return "\n".join(lines + ["", line])
    lines[old[0]] = line
    return "\n".join(x for i, x in enumerate(lines) if i not in old[1:])


def replot(args):
    """--replot: the chart from the table between the paper-tasks markers of --out, its title from
    the section's lines, and the image line put into the section (the rest of the file unchanged).
    Nothing is run and nothing but matplotlib imported."""
    out = os.path.abspath(args.out)
    section = None
    if os.path.exists(out):
        with open(out, encoding="utf-8") as f:
            section = section_of(f.read())
    rows = read_table(section) if section is not None else []
    if not rows:
        print("error: no paper-tasks table between %s and %s in %s" % (BEGIN, END, out), file=sys.stderr)
        return 2
    chart_path = chart_file(args, out)
    drawn = chart(rows, chart_path, chart_title(rows, *section_run(section)))
    if not drawn:
        return 1
    write_section(out, with_image(section, image_line(chart_ref(drawn, out), rows, replot=True)))
    print("wrote", drawn, "from the table of", out, "(%d rows)" % len(rows))
    return 0


def run_length(args):
    """How long each run trained, for the section's text."""
    rounds = max(1, getattr(args, "rounds", 1))
    return "%g s of training per run%s%s" % (
        min(args.time, 5.0) if args.quick else args.time,
        " on tiny data slices (--quick)" if args.quick else "",
        (", %d rounds (the toolkits' order reversed every other round; speeds are medians over the"
         " rounds, ratios the median of the rounds' ratios with their range in brackets)" % rounds)
        if rounds > 1 else "")


def table(head, rows):
    """The markdown lines of a table: the header, its rule and each row's cells."""
    return (["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            + ["| " + " | ".join(r["cells"]) + " |" for r in rows])


def failures(rows):
    """Say which configurations dyn failed on; the exit status (1 if any)."""
    failed = [r["name"] for r in rows if r["dyn"] is None]
    if failed:
        print("dyn failed on: " + ", ".join(failed))
    return 1 if failed else 0


def gpu_card():
    """The GPU's name (nvidia-smi), or '?'."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
        return out[0] if out else "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def gpu_main(args, argv, env, have_torch, only):
    """--device GPU:0: each configuration of GPU_CONFIGS by dyn on the GPU, PyTorch eager on the
    same GPU (--torch-device cuda) and dyn on the CPU, one after the other; the table goes between
    the paper-tasks-gpu markers of --out."""
    rows = []
    for task, extra in GPU_CONFIGS:
        if only and task not in only:
            continue
        name = (task + " " + " ".join(extra)).strip()
        script = os.path.join(HERE, "tasks", task + ".py")
        peer = os.path.join(HERE, "peers", task + ".py")
        # untimed first: two items on the tiny slices compile the GPU kernels this program uses (cupy
        # caches them on disk; on a fresh machine compiling took most of a short timed run)
        warm = ["--quick", "--items", "2"]
        gpu_args, pt_args = extra + ["--dynet-devices", args.device], extra + ["--torch-device", "cuda"]
        run_one(script, gpu_args + warm, args, env)
        gpu_kv = run_one(script, gpu_args, args, env)
        pt_kv = {}
        if have_torch:
            run_one(peer, pt_args + warm, args, env)
            pt_kv = run_one(peer, pt_args, args, env)
        cpu_kv = run_one(script, extra, args, env)
        gs, unit = speed(gpu_kv)
        ps, _ = speed(pt_kv)
        cs, _ = speed(cpu_kv)
        ratio = gs / ps if gs and ps else None
        bar = GPU_BARS.get(name)
        cells = [name, unit, "%.0f" % gs if gs else "-", "%.0f" % ps if ps else "-", fmt_ratio(ratio, bar),
                 "≥ %g" % bar if bar else "", "%.0f" % cs if cs else "-",
                 "%.2f" % (gs / cs) if gs and cs else "-", quality(gpu_kv), quality(pt_kv) if pt_kv else "-"]
        rows.append({"name": name, "dyn": gs, "torch": ps, "ratio": ratio, "cells": cells})
        print(" | ".join(cells), flush=True)
    what = run_length(args)
    head = ["task", "unit", "dyn GPU", "PyTorch GPU", "dyn/PyTorch", "bar", "dyn CPU", "dyn GPU/CPU",
            "dev dyn GPU", "dev PyTorch GPU"]
    lines = [
        "## The DyNet paper's tasks on the GPU (`bench/run.py --device %s`)" % args.device,
        "",
        "Generated by `python bench/run.py %s` on %s." % (shown_args(argv), datetime.date.today()),
        "",
        "GPU: %s. Host: %s. %s; dyn on the GPU, PyTorch eager on the same GPU and dyn on the CPU run one"
        " after the other for each configuration, each GPU program after an untimed run of two items on"
        " tiny data slices (which compiles the kernels it uses)." % (gpu_card(), machine(args.threads), what),
    ]
    if args.note:
        lines += ["", args.note]
    lines += [""] + table(head, rows)
    out = os.path.abspath(args.out)
    write_section(out, "\n".join(lines), GPU_BEGIN, GPU_END)
    print("wrote", out)
    return failures(rows)


if __name__ == "__main__":
    sys.exit(main())
