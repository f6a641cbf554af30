"""Every code block of README.md and docs/*.md runs as written, or says it is an excerpt.

A fenced ``python`` block is run on its own, in a fresh interpreter, in an empty temporary
directory: it must define everything it uses. A block that shows part of a program (names
defined elsewhere on the page, a call that needs a cluster...) is marked by an HTML comment
on the line before its fence, which the rendered page does not show::

    <!-- excerpt -->
    ```python
    trainer.update()
    ```

Excerpts and shell blocks are checked for syntax only. README.md's two commands are the ones
CI's script runs first, on the test extra alone.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
EXCERPT = re.compile(r"^\s*<!--\s*excerpt\b.*-->\s*$")
PYTHON, SHELL = {"python", "py"}, {"bash", "sh", "shell", "console"}


def blocks(path):
    """(first line number, language, excerpt?, code) of every fenced block of a Markdown page."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence = len(m["indent"]), m["fence"]
        lang = (m["info"].split() or [""])[0].strip("{}.").lower()
        prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        body, j = [], i + 1
        while j < len(lines) and not (
            lines[j].strip().startswith(fence) and not lines[j].strip(fence[0]).strip()
        ):
            body.append(re.sub(r"^ {0,%d}" % indent, "", lines[j]))  # the fence's own indent (in lists)
            j += 1
        out.append((i + 1, lang, bool(EXCERPT.match(prev)), "\n".join(body) + "\n"))
        i = j + 1
    return out


ALL = [(p, *b) for p in PAGES for b in blocks(p)]


def name(page, line):
    return "%s:%d" % (page.relative_to(ROOT), line)


RUNNABLE = [pytest.param(p, code, id=name(p, n)) for p, n, lang, ex, code in ALL if lang in PYTHON and not ex]


def test_the_pages_have_blocks_and_every_fence_closes():
    assert len(PAGES) > 10 and len(RUNNABLE) >= 5
    for page in PAGES:
        fences = [ln for ln in page.read_text(encoding="utf-8").splitlines() if FENCE.match(ln)]
        assert len(fences) == 2 * len(blocks(page)), "%s: an unclosed code fence" % page.name


@pytest.mark.parametrize("page,code", RUNNABLE)
def test_python_block_runs_as_written(page, code, tmp_path):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    script = tmp_path / "snippet.py"
    script.write_text(code, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, "%s\n--- the block:\n%s\n--- its error:\n%s" % (
        page.name,
        code,
        proc.stderr[-3000:],
    )


@pytest.mark.parametrize(
    "page,code",
    [pytest.param(p, code, id=name(p, n)) for p, n, lang, ex, code in ALL if lang in PYTHON and ex],
)
def test_python_excerpt_is_valid_python(page, code):
    compile(code, "%s (excerpt)" % page.name, "exec")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize(
    "page,code", [pytest.param(p, code, id=name(p, n)) for p, n, lang, _ex, code in ALL if lang in SHELL]
)
def test_shell_block_is_valid_bash(page, code):
    proc = subprocess.run(["bash", "-n"], input=code, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, "%s:\n%s\n%s" % (page.name, code, proc.stderr)


def test_readme_commands_are_the_ones_ci_runs_first():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    install = 'pip install -e ".[test]" && python examples/demo.py'
    assert "    %s\n" % install in readme and "    python -m pytest\n" in readme
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    first = ci.index('pip_install -e ".[test]"\n')
    assert first < ci.index("python examples/demo.py\n") < ci.index("python -m pytest -q\n")
    assert first < ci.index('pip_install -e ".[test,mpi,docs]"')  # the extras only after that
