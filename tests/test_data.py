"""dyn.data: the one rule for finding the data folder (--data, then DYN_DATA, then ../shared/data)."""

import subprocess
import sys
from pathlib import Path

import pytest

from dyn import data


def make_tagging(folder):
    d = folder / "tagging" / "wikiner-10k"
    d.mkdir(parents=True)
    for name in ("train.txt", "dev.txt"):
        (d / name).write_text("Ada|I-PER saw|O Rome|I-LOC\n")
    return folder


def test_the_argument_wins_then_the_environment_then_the_default(tmp_path, monkeypatch):
    given, env = make_tagging(tmp_path / "given"), make_tagging(tmp_path / "env")
    monkeypatch.setenv("DYN_DATA", str(env))
    assert data.find_data(given, need="tagging") == given.resolve()
    assert data.find_data(None, need="tagging") == env.resolve()
    monkeypatch.delenv("DYN_DATA")
    folder, source = data.data_dir(None)
    assert source == "default"
    assert folder == (Path(data.__file__).resolve().parent.parent.parent / "shared" / "data").resolve()


def test_a_given_folder_that_lacks_a_file_is_an_error_not_a_fallback(tmp_path, monkeypatch):
    monkeypatch.setenv("DYN_DATA", str(make_tagging(tmp_path / "env")))
    (tmp_path / "empty").mkdir()
    with pytest.raises(data.DataNotFoundError) as info:
        data.find_data(tmp_path / "empty", need=["tagging", "ptb/ptb.train.txt"])
    msg = str(info.value)
    assert msg.startswith("dyn: data not found: %s (the path given (--data)) lacks " % (tmp_path / "empty"))
    for path in ("tagging/wikiner-10k/train.txt", "tagging/wikiner-10k/dev.txt", "ptb/ptb.train.txt"):
        assert "    " + path in msg
    assert "DYN_DATA" in msg and "../shared/data" in msg
    assert isinstance(info.value, FileNotFoundError)


def test_a_missing_environment_folder_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("DYN_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(
        data.DataNotFoundError, match="does not exist \\(the DYN_DATA environment variable\\)"
    ):
        data.find_data(need="sst")
    assert data.find_data(tmp_path) == tmp_path.resolve()  # nothing needed: the folder only


def test_command_line_programs_exit_with_the_message(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        data.find_data_or_exit(tmp_path, need="ptb")
    assert info.value.code == 2
    assert "ptb/ptb.valid.txt" in capsys.readouterr().err


def test_python_m_dyn_data_lists_the_data_sets(tmp_path):
    make_tagging(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "dyn.data", str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1  # ptb and sst are missing
    assert "data folder: %s (from --data)" % tmp_path.resolve() in proc.stdout
    assert "tagging  found" in proc.stdout and "ptb      missing: ptb/ptb.train.txt" in proc.stdout
