"""examples/parallel_tagger.py and bench/parallel.py on a tiny generated tagging set."""

import importlib.util
import os
import subprocess
import sys

import pytest

from tests.parallel._helpers import read_json, tagger_example_args, write_tagging_data

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=REPO)


def run_example(tmp_path, data, tag, *args):
    extra, out = tagger_example_args(tmp_path, tag)
    cmd = [sys.executable, os.path.join(REPO, "examples", "parallel_tagger.py"), data, *extra, *args]
    proc = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return read_json(out)


def test_two_sync_workers_train_like_one_process_on_the_combined_batch(tmp_path):
    data = write_tagging_data(tmp_path / "data")
    one = run_example(tmp_path, data, "one", "--workers", "1", "--batch", "8")
    two = run_example(tmp_path, data, "two", "--workers", "2", "--mode", "sync", "--batch", "4")
    assert (
        (two["workers"], two["steps"], two["sentences"])
        == (2, one["steps"], one["sentences"])
        == (2, 36, 288)
    )
    assert two["train_loss"] == pytest.approx(one["train_loss"], rel=1e-5)
    assert two["dev_acc"] == one["dev_acc"] > 0.9  # chance is 1/3


def test_two_async_workers_learn(tmp_path):
    data = write_tagging_data(tmp_path / "data")
    got = run_example(tmp_path, data, "async", "--workers", "2", "--mode", "async", "--batch", "4")
    # 96 sentences a epoch, 4 a step: 24 steps an epoch between the two workers
    assert (got["workers"], got["mode"], got["steps"], got["sentences"]) == (2, "async", 72, 288)
    assert got["dev_acc"] > 0.9


def test_bench_reports_every_configuration(tmp_path):
    # the table needs nothing beyond the test extra; the plot (--plot) needs matplotlib, which
    # `pip install -e ".[test]"` does not install: the plot is checked where it is installed
    plot = importlib.util.find_spec("matplotlib") is not None
    data = write_tagging_data(tmp_path / "data")
    out, png = str(tmp_path / "table.md"), str(tmp_path / "curve.png")
    cmd = [
        sys.executable,
        os.path.join(REPO, "bench", "parallel.py"),
        data,
        "--workers",
        "1,2",
        "--repeat",
        "1",
        "--batch",
        "4",
        "--global-batch",
        "8",
        "--out",
        out,
    ] + (["--plot", png] if plot else [])
    proc = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    with open(out) as f:
        text = f.read()
    rows = [line for line in text.splitlines() if line.startswith("| async") or line.startswith("| sync")]
    assert [r.split("|")[1:3] for r in rows] == [
        [" async ", " 1 "],
        [" async ", " 2 "],
        [" sync ", " 1 "],
        [" sync ", " 2 "],
    ]
    sync1, sync2 = rows[2].split("|"), rows[3].split("|")
    assert sync1[7] == sync2[7]  # sync: the same dev accuracy as one process on the global batch
    if not plot:
        pytest.skip("the table is checked; its plot needs matplotlib (pip install -e '.[bench]')")
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(png) > 1000
