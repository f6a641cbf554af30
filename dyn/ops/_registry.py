"""The operation registry: every operation is declared here once.

An operation's computation (shape rule, forward, backward) is compiled in
``dyn/_core/ops/<family>.pyx``; its Python face is declared in ``dyn/ops/<family>.py``
with :func:`op`, which records what the rest of dyn needs to know about it:

* the public function (exported as ``dyn.<name>``) and its docstring,
* the formula and batch rule (for the generated reference, docs/operations.md),
* a numpy reference and test cases (for the generated value and gradient
  tests in tests/ops/test_generated.py).

A new operation cannot hide: tests/ops/test_registry.py fails for any op
without a docstring, formula, reference or cases.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

REGISTRY: dict[str, OpSpec] = {}


@dataclasses.dataclass
class Case:
    """One test configuration of an operation.

    Args:
        shapes: per-example shape of each expression argument (a list-taking
            op gets them as one list).
        kwargs: the non-expression arguments, or a function of the batch size
            returning them (for per-batch-element indices).
        domain: input range per argument: "real", "positive", "nonzero", or a
            (low, high) pair; one value applies to all arguments.
        batches: which batch configurations to test: "none" (every argument
            batch 1), "all" (every argument batch B), "bcast" (argument k batch
            1, others batch B, for each k). Ops whose arguments cannot be
            batched independently leave out what does not apply.
        grad: check gradients (False for piecewise-constant or random ops).
    """

    shapes: list
    kwargs: Any = dataclasses.field(default_factory=dict)
    domain: Any = "real"
    batches: tuple = ("none", "all", "bcast")
    grad: bool = True

    def kwargs_for(self, batch_size: int) -> dict:
        return self.kwargs(batch_size) if callable(self.kwargs) else dict(self.kwargs)


@dataclasses.dataclass
class OpSpec:
    name: str
    fn: Callable
    family: str
    formula: str
    batch_rule: str
    reference: Callable | None
    cases: list
    list_input: bool = False
    batch_reference: bool = False
    random: bool = False
    doc: str = ""


def op(
    *,
    formula: str,
    batch: str,
    reference: Callable | None,
    cases: list,
    list_input: bool = False,
    batch_reference: bool = False,
    random: bool = False,
    name: str | None = None,
    direct: Callable | None = None,
):
    """Register the decorated public function as an operation.

    Args:
        formula: the math, one line (docs).
        batch: how the op treats the batch dimension (docs).
        reference: numpy implementation. Takes float64 arrays for one batch
            element (shaped as the per-example Dim) and the kwargs; with
            ``batch_reference=True`` it takes whole batched arrays (batch as a
            trailing axis, always present) and returns one too.
        cases: list of :class:`Case`.
        list_input: the op takes its expressions as one list argument.
        random: output is random (value tests use statistics, not a reference).
        direct: the compiled function that does the whole operation, with the
            decorated function's signature. The public name is then bound to
            it, with the decorated function's name and docstring (the decorated
            function is only a docstring): a call is one C-level call instead
            of a Python frame and then one (per-token code calls these
            thousands of times per graph).
    """

    def register(fn: Callable) -> Callable:
        opname = name or fn.__name__
        if opname in REGISTRY:
            raise RuntimeError("operation %r registered twice" % opname)
        public = fn if direct is None else _bind_direct(fn, direct)
        REGISTRY[opname] = OpSpec(
            name=opname,
            fn=public,
            family=fn.__module__.rsplit(".", 1)[-1],
            formula=formula,
            batch_rule=batch,
            reference=reference,
            cases=cases,
            list_input=list_input,
            batch_reference=batch_reference,
            random=random,
            doc=(fn.__doc__ or "").strip(),
        )
        return public

    return register


def _bind_direct(fn: Callable, direct: Callable) -> Callable:
    """`direct` under fn's name, module and docstring, after checking that it
    takes the same arguments (names and defaults) and is not already bound."""
    if getattr(direct, "_dyn_op", None) is not None:
        raise RuntimeError("%s: compiled function %s is already the public %s"
                           % (fn.__name__, direct.__name__, direct._dyn_op))
    want, got = inspect.signature(fn), inspect.signature(direct)
    if want != got:
        raise RuntimeError("%s%s: the compiled function %s has the signature %s"
                           % (fn.__name__, want, direct.__name__, got))
    direct.__name__ = direct.__qualname__ = fn.__name__
    direct.__module__ = fn.__module__
    direct.__doc__ = fn.__doc__
    direct._dyn_op = fn.__name__
    return direct
