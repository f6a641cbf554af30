"""Every registered operation, with and without automatic batching.

For each op, case and batch configuration of the op registry (the same ones
tests/ops/test_generated.py checks against numpy): one graph holds several
independent instances of the op (each with its own inputs), its value is
asked for in the middle of the graph, and a loss over all of them is
back-propagated. With autobatching on, the values of every instance, the loss
and the gradient of every input must equal those of the node-by-node engine
(float64, to rounding); and an op whose kernel declares itself batchable must
really have run as a batch.
"""

import numpy as np
import pytest

import dyn as dy
from dyn._core.core import autobatch as _autobatch
from dyn._core.core import graph as _graph
from dyn.ops._registry import REGISTRY

from ..ops import _harness as H
from ..ops.test_generated import PARAMS

K = 4  # instances per graph: the first one is computed alone (value() mid-graph)


def _run(spec, case, mode, ci, autobatching, share_first=False, fan_out=False):
    dy.renew_cg(autobatching=autobatching)
    inputs, ys = [], []
    shared = None
    for j in range(K):
        arrays, bds = H.make_arrays(spec, case, mode, seed=1000 * ci + j)
        xs = [dy.inputTensor(a, batched=bd > 1) for a, bd in zip(arrays, bds)]
        if share_first and xs:
            shared = xs[0] if shared is None else shared
            xs[0] = shared
        kwargs = case.kwargs_for(max(bds, default=1))
        y = spec.fn(list(xs), **kwargs) if spec.list_input else spec.fn(*xs, **kwargs)
        if fan_out:  # the same inputs twice: duplicate arguments inside one batch
            y = y + (spec.fn(list(xs), **kwargs) if spec.list_input else spec.fn(*xs, **kwargs))
        if j == 0:
            y.value()  # a value in the middle of the graph
        inputs.append(xs)
        ys.append(y)
    loss = dy.esum([H.loss_of(y, seed=7 + j) for j, y in enumerate(ys)])
    loss.backward(full=True)
    out = {
        "loss": loss.value(),
        "values": [y.npvalue() for y in ys],
        "grads": [[x.gradient() for x in xs] for xs in inputs],
    }
    if autobatching:
        out["batches"] = _autobatch.batches()
        out["kernel"] = _graph.describe()[_expr_nid(ys[-1])][0]
    return out


def _expr_nid(e):
    from dyn._core.core import expr as _expr

    return _expr.node_of(e)


def _compare(name, a, b):
    np.testing.assert_allclose(b["loss"], a["loss"], rtol=1e-9, atol=1e-10, err_msg="%s: loss" % name)
    for j, (u, v) in enumerate(zip(a["values"], b["values"])):
        np.testing.assert_allclose(
            v, u, rtol=1e-9, atol=1e-10, err_msg="%s: value of instance %d" % (name, j)
        )
    for j, (gu, gv) in enumerate(zip(a["grads"], b["grads"])):
        for k, (u, v) in enumerate(zip(gu, gv)):
            what = "%s: gradient of input %d of instance %d" % (name, k, j)
            np.testing.assert_allclose(v, u, rtol=1e-9, atol=1e-10, err_msg=what)


@pytest.mark.parametrize("name,ci,mode", PARAMS)
def test_autobatched_equals_unbatched(name, ci, mode, float64):
    spec = REGISTRY[name]
    case = spec.cases[ci]
    if spec.random:
        pytest.skip("random: tested in test_engine.py")
    plain = _run(spec, case, mode, ci, False)
    auto = _run(spec, case, mode, ci, True)
    _compare(name, plain, auto)
    if _autobatch.kernel_batchable(auto["kernel"]) and mode[0] != "bcast":
        # instances 1..K-1 were computed together: at least the loss nodes batch,
        # and the op itself unless its arguments rule it out (see its argument rule)
        assert auto["batches"], "%s: nothing ran as a batch" % name


@pytest.mark.parametrize("name,ci,mode", [p for p in PARAMS if p.values[2][0] in ("none", "all")])
def test_autobatched_shared_and_duplicate_arguments(name, ci, mode, float64):
    spec = REGISTRY[name]
    case = spec.cases[ci]
    if spec.random or not case.shapes:
        pytest.skip("random, or no inputs")
    for kw in ({"share_first": True}, {"fan_out": True}):
        plain = _run(spec, case, mode, ci, False, **kw)
        auto = _run(spec, case, mode, ci, True, **kw)
        _compare("%s %s" % (name, kw), plain, auto)
