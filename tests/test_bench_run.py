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
