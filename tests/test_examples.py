"""The example programs run unchanged and their models actually learn.

Each example is imported from ``examples/`` by path (it is a script, not part of
the package) and its ``main()`` is run with small sizes and a fixed seed. The
thresholds sit well below the accuracies these settings reach and well above
chance, so a broken gradient or update fails the test while ordinary
numerical differences do not.
"""

import functools
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# DyNet programs receive these on the command line; every example must ignore them.
DYNET_FLAGS = ["--dynet-mem", "64", "--dynet-seed", "1"]


def load_example(name):
    """Imports ``examples/<name>.py`` as a fresh module."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Small-size arguments per example, and the held-out accuracy each must beat.
# Chance is about 0.33 for the 4-class Figure 1 task (majority class) and about
# 0.5 for the others.
ARGS = {
    "paper_fig1_classifier": ["--train", "800", "--test", "300", "--epochs", "4"],
    "paper_fig2_tree_rnn": ["--train", "500", "--test", "200", "--epochs", "4"],
    "paper_fig3_early_exit": ["--train", "800", "--test", "300", "--epochs", "5", "--layers", "4"],
    "demo": ["--train", "800", "--test", "300", "--epochs", "25"],
    # the generated tagging set, asked for explicitly (the data folder is not read in tests)
    "tagger_tricks": ["--generated", "--train", "300", "--epochs", "4"],
}
MIN_TEST_ACC = {
    "paper_fig1_classifier": 0.75,
    "paper_fig2_tree_rnn": 0.85,
    "paper_fig3_early_exit": 0.8,
    "demo": 0.9,
    "tagger_tricks": 0.9,
}


@functools.cache
def run_example(name):
    """Runs an example's ``main()`` once per session; later calls reuse the result."""
    return load_example(name).main([*ARGS[name], "--seed", "1", *DYNET_FLAGS])


@pytest.mark.parametrize("name", sorted(ARGS))
def test_example_learns(name):
    result = run_example(name)
    assert result["test_acc"] > MIN_TEST_ACC[name], result
    assert result["train_acc"] > MIN_TEST_ACC[name], result
    assert result["test_acc"] > result["chance"] + 0.25, result


def test_early_exit_builds_shallow_graphs():
    # Figure 3's point: confident inputs stop early, so once the model has learnt
    # something the mean depth is below the full depth of 4 layers.
    result = run_example("paper_fig3_early_exit")
    assert 1.0 <= result["test_depth"] < 3.5, result


def test_tagger_says_where_the_data_goes_when_it_is_missing(tmp_path):
    # without the data and without --generated: a message and exit status 2, no traceback, no
    # silent switch to generated data
    env = dict(os.environ, DYN_DATA=str(tmp_path / "nowhere"), OPENBLAS_NUM_THREADS="1")
    cmd = [sys.executable, str(EXAMPLES / "tagger_tricks.py"), "--train", "10"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "epoch" not in proc.stdout
    assert (
        "dyn: data not found: %s does not exist (the DYN_DATA environment variable)" % (tmp_path / "nowhere")
        in proc.stderr
    )
    assert "tagging/wikiner-10k/train.txt" in proc.stderr and "--data DIR" in proc.stderr
