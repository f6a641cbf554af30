"""The documentation site: mkdocs.yml's nav, the tutorial notebooks, and (after a build) the site.

The site itself is built by CI (`mkdocs build --strict`, which executes every notebook); these
tests check what can go wrong without a build (a nav entry without its file, a page left out of
the nav, a notebook that is not valid or was committed with outputs), and, when DYN_DOCS_SITE
names a built site, that the pages the notebooks produced hold their figures.
"""

import base64
import os
import re
from pathlib import Path

import pytest

pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
nbformat = pytest.importorskip("nbformat", reason="the docs extra is not installed")
yaml = pytest.importorskip("yaml", reason="PyYAML comes with mkdocs")

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
# pages of the repository that the site leaves out on purpose (mkdocs.yml's exclude_docs)
NOT_IN_SITE = {"README.md"}


def _nav_paths(entries):
    """Every file named in a (nested) mkdocs nav."""
    for entry in entries:
        if isinstance(entry, str):
            yield entry
        elif isinstance(entry, dict):
            for value in entry.values():
                yield from _nav_paths(value if isinstance(value, list) else [value])


@pytest.fixture(scope="module")
def config():
    with open(ROOT / "mkdocs.yml", encoding="utf-8") as f:
        return yaml.safe_load(f)


@pytest.fixture(scope="module")
def nav(config):
    return list(_nav_paths(config["nav"]))


def test_the_site_is_built_from_docs_and_runs_the_notebooks(config):
    assert config["docs_dir"] == "docs"
    plugins = {next(iter(p)) if isinstance(p, dict) else p: p for p in config["plugins"]}
    jupyter = plugins["mkdocs-jupyter"]["mkdocs-jupyter"]
    # an error in any cell must fail the build, and outputs must come from the current code
    assert jupyter["execute"] is True and jupyter["allow_errors"] is False and jupyter["cache"] is False


def test_every_nav_entry_exists(nav):
    missing = [p for p in nav if not (DOCS / p).is_file()]
    assert not missing, "mkdocs.yml's nav names files that do not exist under docs/: %s" % missing


def test_every_page_and_notebook_is_in_the_nav(nav):
    pages = {
        p.relative_to(DOCS).as_posix()
        for p in DOCS.rglob("*")
        if p.suffix in (".md", ".ipynb") and not any(part.startswith(".") for part in p.parts)
    }
    left_out = sorted(pages - set(nav) - NOT_IN_SITE)
    assert not left_out, (
        "pages under docs/ that the site does not show (add them to mkdocs.yml's nav): %s" % (left_out,)
    )


def test_nav_has_the_main_pages(nav):
    for page in (
        "index.md",
        "getting_started.md",
        "migration.md",
        "design.md",
        "operations.md",
        "devices.md",
        "autobatching.md",
        "training.md",
        "benchmarks.md",
    ):
        assert page in nav, page


@pytest.mark.parametrize("path", sorted(DOCS.glob("tutorials/*.ipynb")), ids=lambda p: p.name)
def test_notebooks_are_valid_and_committed_without_outputs(path):
    book = nbformat.read(path, as_version=4)
    nbformat.validate(book)
    code = [c for c in book.cells if c.cell_type == "code"]
    assert code, "%s has no code" % path.name
    # the site build executes them: committed outputs would be stale and make diffs unreadable
    assert all(not c.outputs and c.execution_count is None for c in code), (
        "%s was committed with outputs; clear them (the site build runs the notebook)" % path.name
    )
    assert book.cells[0].cell_type == "markdown" and book.cells[0].source.startswith("# "), (
        "%s must start with a '# Title' markdown cell (the page title)" % path.name
    )


@pytest.mark.parametrize("path", sorted(DOCS.glob("tutorials/*.ipynb")), ids=lambda p: p.name)
def test_notebooks_find_their_data_by_the_package_rule(path):
    # one rule everywhere (dyn.data: --data, DYN_DATA, ../shared/data), no copy of it per notebook
    code = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
    assert "/work/" not in code and "os.environ" not in code and "def find_data" not in code
    if "find_data(" in code:
        assert "from dyn.data import DataNotFoundError, find_data" in code
        assert "except DataNotFoundError" in code and "WARNING:" in code  # said, never silent


def test_graph_tutorial_warns_when_dot_is_missing(tmp_path):
    pytest.importorskip("IPython", reason="the docs extra is not installed")
    import subprocess
    import sys

    book = nbformat.read(DOCS / "tutorials" / "05_visualising_graphs.ipynb", as_version=4)
    setup = next(c.source for c in book.cells if c.cell_type == "code")
    env = dict(os.environ, PATH=str(tmp_path))  # no dot on this PATH
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-c", setup], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "WARNING: graphviz's dot program is not installed" in proc.stdout


def test_notebook_code_cells_wrap_rather_than_being_cut_off():
    css = (DOCS / "stylesheets" / "extra.css").read_text(encoding="utf-8")
    rule = re.search(r"\.md-typeset \.jupyter-wrapper \.highlight-ipynb pre[^{]*\{([^}]*)\}", css)
    assert rule and "white-space: pre-wrap" in rule.group(1), "notebook code must wrap (extra.css)"


def test_devices_page_says_how_to_choose_the_gpu_and_what_to_install():
    text = (DOCS / "devices.md").read_text(encoding="utf-8")
    for needed in ("--dynet-gpus", "--dynet-devices", "DYN_DEVICE", 'dyn.init(devices="GPU:0")',
                   'pip install ".[gpu]"', "cupy-cuda13x", "DYN_GPU_STANDIN"):
        assert needed in text, needed


# ----------------------------------------------------------------- a built site (CI sets DYN_DOCS_SITE)

SITE = os.environ.get("DYN_DOCS_SITE")
needs_site = pytest.mark.skipif(not SITE, reason="DYN_DOCS_SITE does not name a built site (CI sets it)")
PNG = re.compile(r"<img[^>]+src=\"data:image/png;base64,")


def _page(notebook_stem):
    path = Path(SITE) / "tutorials" / notebook_stem / "index.html"
    # a built site without the page is a failure, not a skip: the nav names every tutorial
    assert path.is_file(), "%s has no page in the built site %s" % (notebook_stem, SITE)
    return path.read_text(encoding="utf-8")


@needs_site
@pytest.mark.parametrize("stem", ["01_first_model", "02_minibatching", "04_treelstm_autobatching"])
def test_built_tutorials_show_their_plots(stem):
    html = _page(stem)
    assert PNG.search(html), "%s's page has no plot: did the notebook run?" % stem
    assert "Traceback" not in html


SVG_IMG = re.compile(r"<img[^>]+src=\"data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)\"")


def _graphviz_drawings(html):
    """The graphviz drawings of a page: SVG outputs (the site embeds them as base64 images) and
    SVG inlined in HTML outputs. The theme's own icons are SVG too, but none is a graphviz graph."""
    svgs = [base64.b64decode(m.group(1)).decode("utf-8", "replace") for m in SVG_IMG.finditer(html)]
    svgs += re.findall(r"<svg.*?</svg>", html, re.S)
    return [s for s in svgs if re.search(r"<g[^>]*class=\"graph\"", s) and 'class="node"' in s]


@needs_site
def test_built_site_has_a_rendered_graph():
    from dyn.display import PALETTE

    drawings = _graphviz_drawings(_page("05_visualising_graphs"))
    assert drawings, "no rendered computation graph on the visualising page"
    assert any("pickneglogsoftmax" in s for s in drawings), "the drawn graphs do not show the loss node"
    # the autobatched graph: nodes filled with the colours of their batches
    assert any(s.count('fill="%s"' % c) >= 2 for s in drawings for c in PALETTE), (
        "no drawing colours the batches of the autobatched graph"
    )


@needs_site
def test_built_site_has_the_gradient_norm_plot():
    html = _page("03_tagger_tricks")
    assert PNG.search(html), "no plot on the tagger-tricks page"
    assert re.search(r"gradient.norm", html, re.I), (
        "the tagger-tricks page does not mention the gradient norm"
    )


@needs_site
def test_built_benchmarks_page_shows_its_plots():
    page = Path(SITE) / "benchmarks" / "index.html"
    assert page.is_file(), "no benchmarks page in the built site %s" % SITE
    sources = re.findall(r"<img[^>]+src=\"([^\"]+\.png)\"", page.read_text(encoding="utf-8"))
    assert sources, "the benchmarks page shows no plot"
    missing = [s for s in sources if not (page.parent / s).resolve().is_file()]
    assert not missing, "the benchmarks page shows images missing from the site: %s" % missing
