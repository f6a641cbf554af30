"""Where the example data lives: one rule for the examples, benchmarks and tutorials.

The data folder is, in this order:

1. the path given to the program (its ``--data`` argument, or ``find_data(path)``);
2. else the ``DYN_DATA`` environment variable;
3. else ``shared/data`` beside the repository: ``../shared/data`` seen from the
   root of the dyn checkout (``git clone ... dyn`` next to a ``shared/data`` folder).

The first of these that is set is the one used: a ``--data`` that lacks a file is an
error, not a reason to look elsewhere. The folder holds the data sets under their own
names::

    DATA/tagging/wikiner-10k/{train,dev}.txt   WikiNER, ``word|tag`` per token
    DATA/ptb/ptb.{train,valid,test}.txt        Penn Treebank text (Mikolov's)
    DATA/sst/{train,dev,test}.txt              Stanford Sentiment Treebank trees

Example:
    >>> from dyn.data import find_data
    >>> folder = find_data(need=["tagging/wikiner-10k/train.txt"])   # a pathlib.Path

``python -m dyn.data`` prints which folder the rule picks and what it holds.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ENV = "DYN_DATA"

# what each data set of the examples and benchmarks needs, by the name the programs use
DATASETS = {
    "tagging": ("tagging/wikiner-10k/train.txt", "tagging/wikiner-10k/dev.txt"),
    "ptb": ("ptb/ptb.train.txt", "ptb/ptb.valid.txt"),
    "sst": ("sst/train.txt", "sst/dev.txt"),
}


class DataNotFoundError(FileNotFoundError):
    """The data folder the rule picked lacks a file the program needs; ``str()`` says where the
    data goes and what it must hold (print it: it is written for the person who runs the program)."""


def repository_root() -> Path | None:
    """The root of the dyn checkout: the folder above this package when it holds pyproject.toml
    (a clone, installed with ``pip install -e``), else the nearest such folder above the current
    directory (a notebook opened in docs/tutorials of a clone), else None."""
    here = Path(__file__).resolve().parent.parent
    if (here / "pyproject.toml").is_file() and (here / "dyn").is_dir():
        return here
    cwd = Path.cwd().resolve()
    for p in (cwd, *cwd.parents):
        if (p / "pyproject.toml").is_file() and (p / "dyn" / "__init__.py").is_file():
            return p
    return None


def default_data_dir() -> Path | None:
    """``../shared/data`` seen from the repository root (None outside a checkout)."""
    root = repository_root()
    return None if root is None else (root.parent / "shared" / "data").resolve()


def data_dir(path=None) -> tuple[Path | None, str]:
    """The folder the rule picks and why: (folder, "--data" | "DYN_DATA" | "default")."""
    if path:
        return Path(path).expanduser().resolve(), "--data"
    if os.environ.get(ENV):
        return Path(os.environ[ENV]).expanduser().resolve(), ENV
    return default_data_dir(), "default"


def _needs(need) -> list[str]:
    if need is None:
        return []
    if isinstance(need, (str, os.PathLike)):
        need = [need]
    out = []
    for item in need:
        out.extend(DATASETS.get(str(item), (str(item),)))
    return out


def explain(folder, source, missing, need) -> str:
    """The message of a DataNotFoundError."""
    why = {
        "--data": "the path given (--data)",
        ENV: "the %s environment variable" % ENV,
        "default": "the default location, ../shared/data beside the repository",
    }[source]
    if folder is None:
        where = "no data folder: %s is not set, and dyn is not running from a clone of its repository" % ENV
    elif not folder.is_dir():
        where = "%s does not exist (%s)" % (folder, why)
    else:
        where = "%s (%s) lacks %s" % (folder, why, ", ".join(missing))
    lines = [
        "dyn: data not found: " + where + ".",
        "The data folder is found in this order: the --data argument, the %s environment variable,"
        " then ../shared/data beside the repository." % ENV,
    ]
    if need:
        lines.append("This program needs, inside that folder:")
        lines.extend("    " + n for n in need)
    lines += [
        "Put the data sets there (tagging/wikiner-10k, ptb, sst: see docs/getting_started.md, 'Data'),",
        "then run again with --data DIR, or with %s=DIR set." % ENV,
    ]
    return "\n".join(lines)


def find_data(path=None, need=None) -> Path:
    """The data folder by the rule above, checked to hold what the caller needs.

    Args:
        path: an explicit folder (a program's ``--data``); None to use ``DYN_DATA`` or the default.
        need: paths relative to the folder that must exist (files or folders), or data set names
            of ``DATASETS`` ("tagging", "ptb", "sst") standing for their files.

    Returns:
        The folder, absolute.

    Raises:
        DataNotFoundError: the folder is missing or lacks a needed path; the message says where
            the data goes and what it must hold.
    """
    folder, source = data_dir(path)
    need = _needs(need)
    if folder is None or not folder.is_dir():
        raise DataNotFoundError(explain(folder, source, need, need))
    missing = [n for n in need if not (folder / n).exists()]
    if missing:
        raise DataNotFoundError(explain(folder, source, missing, need))
    return folder


def find_data_or_exit(path=None, need=None) -> Path:
    """find_data for a command-line program: on failure, print the message (no traceback) and exit
    with status 2."""
    try:
        return find_data(path, need)
    except DataNotFoundError as e:
        sys.stderr.write(str(e) + "\n")
        raise SystemExit(2) from None


def main(argv=None) -> int:
    """``python -m dyn.data [DIR]``: the folder the rule picks and which data sets it holds."""
    argv = sys.argv[1:] if argv is None else argv
    folder, source = data_dir(argv[0] if argv else None)
    print("data folder: %s (from %s)" % (folder, source))
    ok = True
    for name, files in DATASETS.items():
        present = folder is not None and all((folder / f).exists() for f in files)
        ok = ok and present
        print("  %-8s %s" % (name, "found" if present else "missing: " + ", ".join(files)))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
