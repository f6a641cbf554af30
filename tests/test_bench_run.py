"""bench/run.py rewrites only its own section of docs/benchmarks.md (no benchmark is run here)."""

import importlib.util
import os

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
    for switch in ("dot", "deferred-catchup", "adam-still", "gemv-t"):
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
