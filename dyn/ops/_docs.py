"""Write docs/operations.md from the registry: ``python -m dyn.ops._docs``."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

HEADER = """# Operation reference

Generated from the operation registry (`dyn/ops/*.py`) by
`python -m dyn.ops._docs`; tests/ops/test_registry.py fails when this file is
out of date. Every operation here has generated value, batch and float64
gradient tests (tests/ops/test_generated.py). Data are column-major as in
DyNet; "batch 1 broadcasts" means an argument with batch size 1 is used for
every element of the other arguments' batch (and receives the summed gradient).

| operation | signature | formula | batch |
|---|---|---|---|
"""


def render() -> str:
    import dyn  # noqa: F401  (registers every op)
    from dyn.ops._registry import REGISTRY

    rows = []
    sections = []
    for family in sorted({s.family for s in REGISTRY.values()}):
        for name, spec in sorted(REGISTRY.items()):
            if spec.family != family:
                continue
            shown = name if name.isidentifier() else "`x %s y`" % name
            sig = str(inspect.signature(spec.fn)) if name.isidentifier() else ""
            rows.append(
                "| %s | `%s%s` | %s | %s |"
                % (
                    shown if not name.isidentifier() else "`%s`" % name,
                    name if name.isidentifier() else "",
                    sig,
                    # "](" would start a Markdown link ("[i;f](Wx x + b)")
                    spec.formula.replace("|", "\\|").replace("](", "]\\("),
                    spec.batch_rule,
                )
            )
            sections.append("### %s (%s)\n\n%s\n" % (name, family, spec.doc))
    return HEADER + "\n".join(rows) + "\n\n## Details\n\n" + "\n".join(sections)


def main(argv=None):
    out = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
    out.write_text(render())
    print("wrote", out, file=sys.stderr)


if __name__ == "__main__":
    main()
