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

**NaN in, NaN out.** An output element is NaN when an input element it
depends on is NaN; elements an operation only selects past (`pick`,
`select_rows`, `pick_range` ... leaving the NaN out) do not. Operations that
choose a maximum or minimum (`max_dim`, `min_dim`, `bmax`, `bmin`, `emax`,
`emin`, `kmax_pooling`, `maxpooling2d`) treat NaN as the winner, where IEEE
fmax/fmin would skip it; `rectify` and the hinge losses keep a NaN rather
than clamping it to 0; `argmax` returns a one-hot at the first NaN, as
`numpy.argmax` does. In backward, the gradient of a NaN input is NaN wherever
the derivative depends on its value (`rectify`, `tanh`, `softmax`, norms ...);
operations that only route gradients (sums, picks, concatenation, the element
a max selected) pass the incoming gradient on unchanged. To find where a NaN
or Inf first appears, build the graph with `dy.renew_cg(check_validity=True)`:
every node's value is checked as it is computed, also with autobatching, and
the first one holding a NaN or Inf raises
`RuntimeError: NaN or Inf detected: first in node 3 (log, dim {3})`.

| operation | signature | formula | batch |
|---|---|---|---|
"""


ERRORS = """## Errors

Bad input is refused when the expression is created, so the traceback points
at the line that made it, and the failed call leaves the graph as it was. The
message names the operation and the offending value or shape (as DyNet Dims,
`{3,4}x2` for batch 2). These are the exceptions a program can get:

- `TypeError`: an argument of the wrong type. Something other than an
  Expression where one belongs; a float, bool, None, string or array where an
  integer (an index, a dim, a count) belongs; something other than a real
  number where a number belongs; complex, None, string or other non-numeric
  data given as input or parameter values.
- `ValueError`: a value outside its domain. Shapes that do not fit together,
  a dim number past the tensor's order, a probability outside [0, 1], a
  dimension that is not positive, an empty list, a tensor of more than
  2³¹ − 1 elements; `backward()` from a non-scalar.
- `IndexError`: an index out of range (`pick`, `select_rows`,
  `pick_batch_elem`, `lookup`, ...); the message gives the index and the size.
- `dy.StaleExpressionError`: an expression of an earlier graph (made before
  `renew_cg()`), or one dropped by `cg_revert()`, was used. It is both a
  `ValueError` and a `RuntimeError`, the classes DyNet raises for it, so
  `except ValueError` keeps working.
- `RuntimeError`: `scalar_value()` of a tensor of several elements;
  `gradient()` before `backward()`; with `check_validity`, a NaN or Inf (the
  message names the first node that made one).
- `MemoryError`: memory ran out in forward or backward; the graph can go on
  with smaller values.

A float with an integral value is taken as a dimension (`dy.zeros((3.0,))` is
`dy.zeros((3,))`, as in DyNet) but never as an index; numpy integers are
integers everywhere.
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
    return HEADER + "\n".join(rows) + "\n\n" + ERRORS + "\n## Details\n\n" + "\n".join(sections)


def main(argv=None):
    out = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
    out.write_text(render())
    print("wrote", out, file=sys.stderr)


if __name__ == "__main__":
    main()
