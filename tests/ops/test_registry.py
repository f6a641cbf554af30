"""Every operation is complete: documented, referenced, tested, exported."""

import inspect

import pytest

import dyn as dy
from dyn.ops._registry import REGISTRY

# The operations of DyNet's API that dyn provides, by their DyNet names (operators by symbol).
CORE_OPS = """+ - * scalar_affine cmult cdiv dot_product concatenate concatenate_cols concatenate_to_batch
transpose reshape pick pick_batch pick_batch_elem pick_batch_elems select_rows select_cols sum_elems
sum_batches esum average tanh logistic rectify exp log softmax log_softmax logsumexp pickneglogsoftmax
pickneglogsoftmax_batch squared_distance squared_norm l2_norm affine_transform dropout noise
nobackprop""".split()


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_op_is_complete(name):
    spec = REGISTRY[name]
    assert spec.doc, "%s has no docstring" % name
    assert spec.formula and spec.batch_rule, "%s lacks a formula or batch rule" % name
    assert spec.cases, "%s has no test cases" % name
    assert spec.random or spec.reference is not None, "%s has no numpy reference" % name


@pytest.mark.parametrize("name", CORE_OPS)
def test_core_op_registered_and_exported(name):
    assert name in REGISTRY, "%s is not registered" % name
    if name.isidentifier():
        assert getattr(dy, name) is REGISTRY[name].fn
        assert inspect.signature(getattr(dy, name))


def test_operation_reference_is_current():
    from pathlib import Path

    from dyn.ops._docs import render

    path = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
    assert path.read_text() == render(), "docs/operations.md is stale: run python -m dyn.ops._docs"


DIRECT = sorted(n for n, s in REGISTRY.items() if getattr(s.fn, "_dyn_op", None) is not None)


def test_hot_ops_are_bound_directly():
    # per-token code calls these thousands of times per graph: no Python frame in between
    for name in ("tanh", "logistic", "rectify", "concatenate", "concatenate_cols", "pickneglogsoftmax",
                 "esum", "cmult", "affine_transform", "pick", "dropout", "softmax", "log_softmax"):
        assert name in DIRECT, name


@pytest.mark.parametrize("name", DIRECT)
def test_direct_op_looks_like_its_declaration(name):
    fn = getattr(dy, name)
    assert fn is REGISTRY[name].fn and fn.__name__ == name
    assert fn.__doc__ and fn.__doc__.strip() == REGISTRY[name].doc
    assert fn.__module__.startswith("dyn.ops.")
    # argument errors name the public op, not the compiled function's old name
    params = inspect.signature(fn).parameters
    with pytest.raises(TypeError, match=r"^%s\(\)" % name):
        fn(*range(len(params) + 1))


def test_direct_signature_mismatch_is_refused():
    from dyn.ops._registry import op

    def compiled(x, y=1):
        return x

    with pytest.raises(RuntimeError, match=r"myop\(x, y=2\): the compiled function compiled has the sig"):
        @op(formula="y = x", batch="none", reference=None, cases=[], name="_test_mismatch", direct=compiled)
        def myop(x, y=2):
            """Doc."""
    assert "_test_mismatch" not in REGISTRY


def test_direct_function_is_bound_once():
    from dyn.ops._registry import op

    with pytest.raises(RuntimeError, match="already the public tanh"):
        @op(formula="y = x", batch="none", reference=None, cases=[], name="_test_twice", direct=dy.tanh)
        def tanh2(x):
            """Doc."""
    assert "_test_twice" not in REGISTRY and dy.tanh.__name__ == "tanh"
