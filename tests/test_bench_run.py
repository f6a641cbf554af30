"""bench/run.py rewrites only its own section of docs/benchmarks.md (no benchmark is run here)."""

import argparse
import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run_module():
    spec = importlib.util.spec_from_file_location("bench_run", os.path.join(ROOT, "bench", "run.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_section_is_replaced_between_the_markers_only(tmp_path):
    run = _run_module()
    out = tmp_path / "benchmarks.md"
    out.write_text(
        "# Benchmarks\n\nintro\n\n%s\nold table\n%s\n\n## Autobatching\n\nkept\n" % (run.BEGIN, run.END)
    )
    run.write_section(str(out), "new table")
    assert out.read_text() == "# Benchmarks\n\nintro\n\n%s\nnew table\n%s\n\n## Autobatching\n\nkept\n" % (
        run.BEGIN,
        run.END,
    )
    run.write_section(str(out), "newer table")  # idempotent apart from the section
    assert out.read_text().count(run.BEGIN) == 1 and "newer table" in out.read_text()
    assert "kept" in out.read_text() and "new table\n" not in out.read_text()


def test_section_is_appended_or_created(tmp_path):
    run = _run_module()
    out = tmp_path / "b.md"
    out.write_text("# Benchmarks\n\ntext\n")
    run.write_section(str(out), "table")
    assert out.read_text() == "# Benchmarks\n\ntext\n\n%s\ntable\n%s\n" % (run.BEGIN, run.END)
    fresh = tmp_path / "sub" / "new.md"
    run.write_section(str(fresh), "table")
    assert fresh.read_text() == "%s\ntable\n%s\n" % (run.BEGIN, run.END)


def test_ratio_cell_marks_a_met_bar():
    run = _run_module()
    assert run.fmt_ratio(1.5, 1.2) == "**1.50**"
    assert run.fmt_ratio(1.1, 1.2) == "1.10"
    assert run.fmt_ratio(None, 1.2) == "-"


def test_the_gpu_section_has_its_own_markers(tmp_path):
    run = _run_module()
    out = tmp_path / "benchmarks.md"
    run.write_section(str(out), "cpu table")
    run.write_section(str(out), "gpu table", run.GPU_BEGIN, run.GPU_END)
    run.write_section(str(out), "gpu table 2", run.GPU_BEGIN, run.GPU_END)
    text = out.read_text()
    assert "cpu table" in text and "gpu table 2" in text and "gpu table\n" not in text
    assert text.count(run.GPU_BEGIN) == 1 and text.count(run.BEGIN) == 1


def _tiny_sst(root):
    """A few PTB-style sentiment trees (a unary node among them), as bench/tasks read SST."""
    trees = ["(3 (2 the) (4 (3 good) (2 film)))", "(1 (2 a) (0 (1 bad) (2 (2 long) (2 film))))",
             "(2 (2 it) (2 (2 is)))", "(4 (4 great) (2 .))"]
    sst = root / "sst"
    sst.mkdir(parents=True)
    for name, k in (("train.txt", 6), ("dev.txt", 2), ("test.txt", 2)):
        (sst / name).write_text("\n".join(trees * k) + "\n")
    return root


def test_tree_task_runs_its_cells_batched_and_timed_by_phase(tmp_path):
    """bench/tasks/treelstm.py: the builder and the plain-operation cell (DyNet's path), N trees a
    graph, autobatched or not, and --phases' four timings; the PyTorch peer at N trees a step."""
    import subprocess
    import sys

    data = _tiny_sst(tmp_path / "data")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=ROOT)
    for extra in (["--cell", "python", "--batch", "4"], ["--batch", "4", "--dynet-autobatch", "1"], []):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "tasks", "treelstm.py"), str(data),
                            "--items", "3", "--phases", *extra], capture_output=True, text=True, timeout=300,
                           env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        final = r.stdout.split("# final")[-1]
        kv = dict(line.split("=", 1) for line in final.split() if "=" in line)
        assert float(kv["sents_per_sec"]) > 0 and 0 <= float(kv["dev_acc"]) <= 1
        assert all(float(kv["phase_%s_us" % p]) > 0 for p in ("build", "forward", "backward", "update"))
    if importlib.util.find_spec("torch") is not None:
        r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "peers", "treelstm.py"), str(data),
                            "--items", "3", "--batch", "4", "--torch-device", "cpu"], capture_output=True,
                           text=True, timeout=300, env=env)
        assert r.returncode == 0 and "sents_per_sec=" in r.stdout, r.stderr[-2000:]


def _run_task(script, data, *extra):
    import subprocess
    import sys

    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=ROOT)
    env.pop("DYN_AUTOBATCH", None)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "tasks", script), str(data), *extra],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    return dict(line.split("=", 1) for line in r.stdout.split("# final")[-1].split() if "=" in line)


def test_ab_compare_times_both_engines_on_the_same_items(tmp_path):
    """--ab-compare: each item trained with automatic batching off and on; both speeds and their
    ratio are printed, and the ratio is the two speeds' quotient."""
    data = _tiny_sst(tmp_path / "data")
    kv = _run_task("treelstm.py", data, "--items", "6", "--batch", "4", "--ab-compare")
    off, on, ratio = (float(kv[k]) for k in ("sents_per_sec_ab_off", "sents_per_sec_ab_on", "ab_on_off"))
    assert off > 0 and on > 0 and abs(ratio - on / off) < 1e-3 * ratio
    assert int(kv["items"]) == 6


def test_phases_with_ab_compare_split_by_engine(tmp_path):
    """--phases with --ab-compare: the four phases timed separately for the engine off and on
    (each item is trained once each way), and no unsplit phase line beside them."""
    data = _tiny_sst(tmp_path / "data")
    kv = _run_task("treelstm.py", data, "--items", "4", "--batch", "2", "--ab-compare", "--phases")
    for way in ("off", "on"):
        for phase in ("build", "forward", "backward", "update"):
            assert float(kv["phase_%s_us_ab_%s" % (phase, way)]) > 0
    assert not any(k.startswith("phase_") and "_ab_" not in k for k in kv)


def test_rnnlm_step_by_step_trains(tmp_path):
    """rnnlm --step: add_input and a softmax per time step (padded minibatches masked), the same
    model as the transduce version; it trains and reaches a finite dev perplexity."""
    ptb = tmp_path / "data" / "ptb"
    ptb.mkdir(parents=True)
    words = "the cat sat on a mat and the dog ran to the cat".split()
    lines = [" ".join(words[i % 5 : i % 5 + 3 + i % 7]) for i in range(40)]
    (ptb / "ptb.train.txt").write_text("\n".join(lines) + "\n")
    (ptb / "ptb.valid.txt").write_text("\n".join(lines[:8]) + "\n")
    for mb in ("1", "4"):
        kv = _run_task("rnnlm.py", tmp_path / "data", "--items", "5", "--minibatch", mb, "--step")
        assert float(kv["words_per_sec"]) > 0 and 1 < float(kv["dev_ppl"]) < 1e4


def test_rnnlm_step_by_step_loss_equals_the_transduce_loss():
    import sys

    sys.path.insert(0, os.path.join(ROOT, "bench", "tasks"))
    try:
        import rnnlm
    finally:
        sys.path.pop(0)
    import dyn as dy

    model = dy.ParameterCollection()
    lm = rnnlm.RNNLM(model, 20, 8, 12, 0)
    sents = [[3, 5, 7, 9, 0], [4, 6, 0], [2, 0]]  # longest first, as lm_minibatches sorts them
    whole, n = lm.loss(sents)
    whole = whole.scalar_value()
    steps, n2 = lm.loss_steps(sents)
    assert n == n2 == 10
    assert abs(steps.scalar_value() - whole) < 1e-5 * abs(whole)


def test_items_trains_exactly_that_many_whatever_the_time_budget(tmp_path):
    """--items N stops after N items and only then, even past --time (and --quick's 5 s): a run
    compared with another on the same examples must not stop early for being slower."""
    data = _tiny_sst(tmp_path / "data")
    kv = _run_task("treelstm.py", data, "--items", "5", "--time", "1e-9", "--quick")
    assert int(kv["items"]) == 5
    kv = _run_task("treelstm.py", data, "--time", "1e-9", "--quick")
    assert int(kv["items"]) == 1        # without --items the budget stops it after the first item


def test_gpu_train_check_compares_only_runs_of_the_same_items(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("gpu_train_check",
                                                  os.path.join(ROOT, "bench", "gpu_train_check.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    runs = {}

    def fake(data, script, extra, items, gpu, timeout):
        return dict(runs[gpu]), 1.0, ""
    monkeypatch.setattr(mod, "run", fake)
    base = {"dev_acc": "0.8475", "train_loss": "0.78130", "items": "40"}
    runs[False], runs[True] = base, dict(base, items="1", dev_acc="0.4804", train_loss="1.64390")
    out = tmp_path / "t.md"
    assert mod.main(["--items", "40", "--only", "Tree-LSTM, autobatched", "--out", str(out)]) == 1
    assert "items trained differ" in out.read_text() and "CPU 40, GPU 1 of 40" in out.read_text()
    runs[True] = dict(base, dev_acc="0.8480")
    assert mod.main(["--items", "40", "--only", "Tree-LSTM, autobatched", "--out", str(out)]) == 0
    assert "| same |" in out.read_text()
    runs[True] = dict(base, dev_acc="0.7")
    assert mod.main(["--items", "40", "--only", "Tree-LSTM, autobatched", "--out", str(out)]) == 1
    assert "DIFFERENT" in out.read_text()


def test_rounds_take_medians_and_show_the_range():
    """--rounds: the median of the rounds' values (None where a run gave nothing), and the range
    of two or more next to it."""
    run = _run_module()
    assert run.median([2.0, None, 1.0, 3.0]) == 2.0
    assert run.median([1.0, 4.0]) == 1.0
    assert run.median([None, None]) is None
    assert run.spread([1.95, 2.3, 2.1]) == " (1.95–2.30)"
    assert run.spread([2.1, None]) == ""
    assert run.spread([0.9981, 1.0042], "%.3f") == " (0.998–1.004)"


def test_paired_switch_and_product_trace_run_on_a_task(tmp_path):
    """bench/paired.py trains each item with a switch on and off (both speeds and their ratio, the
    switch left on after); bench/gemm_trace.py prints the products of a task's training steps with
    their paths."""
    import subprocess
    import sys

    data = _tiny_sst(tmp_path / "data")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=ROOT)
    paired = os.path.join(ROOT, "bench", "paired.py")
    for switch in ("dot", "deferred-catchup", "adam-still", "gemv-t", "null"):
        r = subprocess.run([sys.executable, paired, switch, "treelstm", str(data), "--sparse", "--items", "6",
                            "--warm", "2"], capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        kv = dict(w.split("=", 1) for w in r.stdout.split() if "=" in w)
        on, off, ratio = float(kv["on"]), float(kv["off"]), float(kv["on/off"])
        assert on > 0 and off > 0 and abs(ratio - on / off) < 1e-3 * ratio and kv["switch"] == switch
    r = subprocess.run([sys.executable, paired, "nonsense", "treelstm", str(data)], capture_output=True,
                       text=True, timeout=300, env=env)
    assert r.returncode != 0 and "unknown switch" in r.stderr
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gemm_trace.py"), "treelstm", str(data),
                        "--items", "4", "--top", "5"], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    table = r.stdout.split("# products in training:")[-1].splitlines()
    assert table[0].strip().startswith("4 items") and table[1].split()[:4] == ["op", "m", "n", "k"]
    rows = [line.split() for line in table[2:] if line.strip()]
    assert rows and all(float(row[-3]) > 0 for row in rows)


def test_same_items_tabulates_dev_metrics_per_seed(tmp_path):
    """bench/same_items.py trains each configuration for exactly its items with each seed and
    tabulates the dev metric (median and per seed) and the training loss; without DyNet its column
    stays empty. A seed fixes the run: the same seed twice gives the same figures."""
    import subprocess
    import sys

    data = _tiny_sst(tmp_path / "data")
    out = tmp_path / "same.md"
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "same_items.py"), str(data),
                        "--only", "treelstm,treelstm --sparse", "--seeds", "3,3", "--scale", "0.002",
                        "--out", str(out)], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in out.read_text().splitlines()[2:]]
    assert [(row[0], row[1]) for row in rows] == [("treelstm", "6"), ("treelstm --sparse", "12")]
    for row in rows:
        median, per_seed = row[2].split(" ", 1)
        seeds = per_seed.strip("()").split(", ")
        assert len(seeds) == 2 and seeds[0] == seeds[1] == median and 0 <= float(median) <= 1
        assert row[3] == "-" and row[5] == "-" and float(row[4]) > 0


def _paper_file(run, tmp_path, image=False, dynet=True):
    """A benchmarks file whose paper-tasks section is what main() writes for three rounds of made-up
    runs (one configuration without PyTorch and DyNet), text around it; the rows and its run length."""
    def kv(unit, v, **more):
        return dict({unit: "%r" % v, "startup_time": "0.5"}, **more)

    def runs(unit, d, p, n, dev):
        return {"dyn": [kv(unit, x, dev_acc=dev) for x in d],
                "torch": [kv(unit, x, dev_acc="0.8") if x else {} for x in p],
                "dynet": [kv(unit, x) if x and dynet else {} for x in n],
                "ab": [{"ab_on_off": "%r" % x} for x in (1.0081, 1.0074, 1.0123)]}
    rows = [run.paper_row("bilstm_tagger", runs("words_per_sec", (42096.4, 40123.9, 45000.1),
                                                (4998.2, 5300.7, 4766.0), (17793.3, 17400.2, 18101.9),
                                                "0.895")),
            run.paper_row("treelstm --sparse", runs("sents_per_sec", (1506.2, 1480.0, 1510.9),
                                                    (118.1, 119.3, 112.0), (752.4, 760.1, 701.5), "0.389")),
            run.paper_row("rnnlm --minibatch 4", runs("words_per_sec", (4654.0, 4700.2, 4600.9),
                                                      (None,) * 3, (None,) * 3, "0.1"))]
    what = run.run_length(argparse.Namespace(time=8.0, quick=False, rounds=3))
    machine = "A CPU (x86_64), 2 cores; 1 thread(s) per run"
    lines = run.paper_section("--time 8 --rounds 3", "2026-12-03", machine, what, "", rows,
                              run.image_line("bench_paper.png", rows) if image else None)
    out = tmp_path / "bench.md"
    out.write_text("# Benchmarks\n\nintro\n")
    run.write_section(str(out), "\n".join(lines))
    with open(out, "a", encoding="utf-8") as f:
        f.write("\nafter the section\n")
    return out, rows, what


def test_replot_reads_back_the_table_main_writes(tmp_path):
    """--replot's parsing (no matplotlib needed): the numbers of each row as the cells print them,
    '-' as None, the ratios' ranges, and the run length and date of the section's lines."""
    run = _run_module()
    out, rows, what = _paper_file(run, tmp_path)
    section = run.section_of(out.read_text(encoding="utf-8"))
    back = run.read_table(section)
    assert [r["name"] for r in back] == [r["name"] for r in rows]
    for b, r in zip(back, rows):
        assert b["cells"] == r["cells"]
        for key in ("dyn", "torch", "dynet"):
            assert b[key] == (float("%.0f" % r[key]) if r[key] else None), key
        for key, span in (("ratio", "ratio_range"), ("dn_ratio", "dn_range")):
            assert b[key] == (float("%.2f" % r[key]) if r[key] else None), key
            assert b[span] == (tuple(float("%.2f" % x) for x in r[span]) if r[span] else None), span
    assert back[0]["cells"][4].startswith("**") and back[0]["ratio_range"][0] < back[0]["ratio"]
    assert back[2]["torch"] is back[2]["ratio"] is back[2]["dynet"] is back[2]["dn_range"] is None
    assert run.section_run(section) == (what, "2026-12-03")
    assert run.chart_title(back, what, "2026-12-03") == (
        "DyNet paper tasks, dyn vs DyNet vs PyTorch: %s, 2026-12-03" % what)
    (tmp_path / "none.md").write_text("# Benchmarks\n")
    assert run.main(["--replot", "--out", str(tmp_path / "none.md")]) == 2


def _is_png(path):
    with open(path, "rb") as f:
        return f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_replot_draws_the_chart_and_adds_its_image_line_once(tmp_path):
    pytest.importorskip("matplotlib")
    run = _run_module()
    out, rows, _ = _paper_file(run, tmp_path)
    before = out.read_text(encoding="utf-8")
    png = tmp_path / "bench_paper.png"
    assert run.main(["--replot", "--out", str(out)]) == 0
    assert _is_png(png)
    line = run.image_line("bench_paper.png", rows, replot=True)
    assert "drawn from the table" in line
    after = out.read_text(encoding="utf-8")
    # every byte as it was but the image line, after the table
    assert after == before.replace("\n" + run.END, "\n\n" + line + "\n" + run.END)
    assert run.main(["--replot", "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == after and after.count("](bench_paper.png)") == 1
    # the image line of main()'s own chart is replaced, not repeated; --chart elsewhere is linked there
    out, rows, _ = _paper_file(run, tmp_path, image=True)
    assert run.main(["--replot", "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert text.count("](bench_paper.png)") == 1 and line in text
    assert run.main(["--replot", "--out", str(out), "--chart", str(tmp_path / "img" / "c.png")]) == 0
    assert _is_png(tmp_path / "img" / "c.png") and "](img/c.png)" in out.read_text(encoding="utf-8")


def _drawn(run, rows, path, monkeypatch):
    """chart()'s figure: its axes' legend labels, the PNG written."""
    import matplotlib.figure

    figs, save = [], matplotlib.figure.Figure.savefig

    def keep(fig, *a, **k):
        figs.append(fig)
        return save(fig, *a, **k)
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep)
    assert run.chart(rows, str(path), "title") == str(path) and _is_png(path)
    legends = [ax.get_legend() for ax in figs[0].axes]
    return [[t.get_text() for t in leg.get_texts()] if leg else [] for leg in legends]


def test_chart_without_dynet_is_dyn_against_pytorch(tmp_path, monkeypatch):
    """Rows without DyNet's figures (main() without DyNet; a table without its columns) give the two
    panels of dyn against PyTorch; with them DyNet joins both."""
    pytest.importorskip("matplotlib")
    run = _run_module()
    rows = [{"name": "bilstm_tagger", "dyn": 42000.0, "torch": 5000.0, "ratio": 8.4},
            {"name": "rnnlm --minibatch 4", "dyn": 4600.0, "torch": 5100.0, "ratio": 0.9,
             "ratio_range": (0.8, 1.1)},
            {"name": "treelstm", "dyn": None, "torch": 20.0, "ratio": None, "dynet": None}]
    legends = _drawn(run, rows, tmp_path / "a.png", monkeypatch)
    assert len(legends) == 2 and legends[1] == ["dyn", "PyTorch"] and "dyn / DyNet" not in legends[0]
    assert run.chart_title(rows, "8 s", "2026-12-03") == "DyNet paper tasks, dyn vs PyTorch: 8 s, 2026-12-03"
    rows[0].update(dynet=17000.0, dn_ratio=2.47)
    legends = _drawn(run, rows, tmp_path / "b.png", monkeypatch)
    assert legends[1] == ["dyn", "DyNet", "PyTorch"] and "dyn / DyNet" in legends[0]


def test_replot_imports_neither_dyn_nor_pytorch_nor_dynet(tmp_path):
    """--replot runs where none of the toolkits can be imported (it only redraws a table)."""
    import subprocess
    import sys
    import time

    pytest.importorskip("matplotlib")
    run = _run_module()
    out, _, _ = _paper_file(run, tmp_path)
    blocked = tmp_path / "blocked"
    for name in ("dyn", "torch", "dynet"):
        (blocked / name).mkdir(parents=True)
        (blocked / name / "__init__.py").write_text("raise ImportError('blocked by the test')\n")
    t = time.time()
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "run.py"), "--replot", "--out", str(out)],
                       capture_output=True, text=True, timeout=120, cwd=str(tmp_path),
                       env=dict(os.environ, PYTHONPATH=str(blocked)))
    assert r.returncode == 0, r.stderr[-2000:]
    assert _is_png(tmp_path / "bench_paper.png") and time.time() - t < 60


def test_main_writes_the_table_replot_reads(tmp_path, monkeypatch):
    """main() itself, its runs faked (nothing trains): the section it writes reads back with the
    speeds and ratios it was given, DyNet's among them; --replot keeps a single image line."""
    import sys
    import types

    run = _run_module()
    speeds = {"dyn": 3000.0, "torch": 1200.0, "dynet": 1500.0}

    def fake_run_one(script, extra, args, env, python=None):
        if "--ab-compare" in extra:
            return {"ab_on_off": "1.010"}
        who = "dynet" if "--toolkit" in extra else "torch" if os.sep + "peers" + os.sep in script else "dyn"
        return {"words_per_sec": "%r" % speeds[who], "startup_time": "0.5", "dev_ppl": "700.0"}
    monkeypatch.setattr(run, "run_one", fake_run_one)
    monkeypatch.setattr(run, "machine", lambda threads: "A CPU; %d thread(s) per run" % threads)
    # PyTorch and DyNet "there": find_spec and the `import dynet` check are the only ways main() looks
    monkeypatch.setattr(run, "importlib", types.SimpleNamespace(
        util=types.SimpleNamespace(find_spec=lambda name: object() if name == "torch" else None)))
    monkeypatch.setattr(run, "subprocess", types.SimpleNamespace(run=lambda *a, **k: types.SimpleNamespace(
        returncode=0)))
    monkeypatch.setitem(sys.modules, "common", types.SimpleNamespace(
        default_data_dir=lambda: str(tmp_path), check_data=lambda *a: None))
    monkeypatch.setattr(sys, "path", list(sys.path))
    out = tmp_path / "bench.md"
    argv = ["--only", "rnnlm", "--time", "8", "--rounds", "2", "--dynet-python", "py", "--out", str(out)]
    assert run.main(argv) == 0
    section = run.section_of(out.read_text(encoding="utf-8"))
    rows = run.read_table(section)
    minibatches = ("1", "4", "16", "64", "1 --sparse", "64 --sparse")
    assert [r["name"] for r in rows] == ["rnnlm --minibatch %s" % m for m in minibatches]
    for r in rows:
        assert (r["dyn"], r["torch"], r["dynet"], r["ratio"], r["dn_ratio"]) == (3000, 1200, 1500, 2.5, 2.0)
        assert r["ratio_range"] == (2.5, 2.5) and r["dn_range"] == (2.0, 2.0)
    assert rows[0]["cells"][4] == "**2.50** (2.50–2.50)" and rows[1]["cells"][4] == "2.50 (2.50–2.50)"
    what, date = run.section_run(section)
    assert what == run.run_length(argparse.Namespace(time=8.0, quick=False, rounds=2)) and date
    if importlib.util.find_spec("matplotlib") is not None:
        assert "](bench_paper.png)" in section and "DyNet and PyTorch" in section
        assert run.main(["--replot", "--out", str(out)]) == 0
        assert out.read_text(encoding="utf-8").count("](bench_paper.png)") == 1
