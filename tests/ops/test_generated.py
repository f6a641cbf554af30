"""Value and gradient tests generated from the operation registry.

For every registered op and each of its cases, in every batch configuration
the case allows (all batch 1; all batch B; one argument batch 1 against
batch B): the value equals the numpy reference, the batched result equals a
loop over batch elements, float64 finite differences match backward() for
every input, and backward accumulates (an input used twice gets twice the
gradient).
"""

import numpy as np
import pytest

import dyn as dy
from dyn.ops._registry import REGISTRY

from . import _harness as H


def _params():
    for name, spec in sorted(REGISTRY.items()):
        for ci, case in enumerate(spec.cases):
            n = len(case.shapes)
            for kind in case.batches:
                if kind == "bcast":
                    modes = [(kind, k) for k in range(n)] if n > 1 else []
                elif kind.startswith("bcast"):  # "bcastK": only argument K has batch 1
                    modes = [("bcast", int(kind[5:]))]
                else:
                    modes = [(kind, None)]
                for mode in modes:
                    label = kind + (str(mode[1]) if mode[1] is not None else "")
                    yield pytest.param(name, ci, mode, id="%s-%d-%s" % (name, ci, label))


PARAMS = list(_params())


@pytest.mark.parametrize("name,ci,mode", PARAMS)
def test_value(name, ci, mode, float64):
    spec = REGISTRY[name]
    case = spec.cases[ci]
    arrays, bds = H.make_arrays(spec, case, mode, seed=ci)
    _, y = H.build(spec, case, arrays, bds)
    dims, bd = y.dim()
    assert bd == max(bds, default=1) or spec.batch_reference, "%s: output batch %d for inputs %r" % (
        name,
        bd,
        bds,
    )
    if spec.random:
        assert np.all(np.isfinite(y.npvalue()))
        return
    H.assert_same(y.npvalue(), H.expected(spec, case, arrays, bds), bd, name)


@pytest.mark.parametrize("name,ci,mode", [p for p in PARAMS if p.values[2][0] != "none"])
def test_batched_equals_loop(name, ci, mode, float64):
    spec = REGISTRY[name]
    case = spec.cases[ci]
    if spec.random or spec.batch_reference:
        pytest.skip("acts on the batch itself or is random: checked against its batch reference")
    arrays, bds = H.make_arrays(spec, case, mode, seed=ci)
    _, y = H.build(spec, case, arrays, bds)
    batched = H.per_example(y.npvalue(), y.dim()[1])
    for b in range(max(bds, default=1)):
        dy.renew_cg()
        slices = [a[..., b] if bd > 1 else a for a, bd in zip(arrays, bds)]
        _, yb = H.build(spec, case, slices, [1] * len(slices))
        np.testing.assert_allclose(
            batched[..., b].reshape(yb.npvalue().shape),
            yb.npvalue(),
            rtol=1e-12,
            atol=1e-12,
            err_msg="%s batch element %d" % (name, b),
        )


@pytest.mark.parametrize("name,ci,mode", PARAMS)
def test_gradient(name, ci, mode, float64):
    spec = REGISTRY[name]
    case = spec.cases[ci]
    if spec.random or not case.grad:
        pytest.skip("no gradient check for this case (random or piecewise constant)")
    arrays, bds = H.make_arrays(spec, case, mode, seed=ci)
    xs, y = H.build(spec, case, arrays, bds, reusable=True)
    loss = H.loss_of(y, seed=100 + ci)
    loss.backward(full=True)
    analytic = [x.gradient() for x in xs]
    for k, (x, a) in enumerate(zip(xs, arrays)):
        num = H.numeric_grad(x, a, loss)
        np.testing.assert_allclose(
            analytic[k],
            num,
            rtol=1e-5,
            atol=1e-6,
            err_msg="%s: gradient of input %d (batch sizes %r)" % (name, k, bds),
        )


@pytest.mark.parametrize("name,ci,mode", [p for p in PARAMS if p.values[2][0] == "all"])
def test_backward_accumulates(name, ci, mode, float64):
    """Fan-out: the same inputs feed the op twice; gradients add up."""
    spec = REGISTRY[name]
    case = spec.cases[ci]
    if spec.random or not case.grad:
        pytest.skip("random or piecewise constant")
    arrays, bds = H.make_arrays(spec, case, mode, seed=ci)
    xs, y1 = H.build(spec, case, arrays, bds)
    H.loss_of(y1, seed=7).backward(full=True)
    once = [x.gradient() for x in xs]
    kwargs = case.kwargs_for(max(bds, default=1))
    y2 = spec.fn(list(xs), **kwargs) if spec.list_input else spec.fn(*xs, **kwargs)
    (H.loss_of(y1, seed=7) + H.loss_of(y2, seed=7)).backward(full=True)
    for k, x in enumerate(xs):
        np.testing.assert_allclose(
            x.gradient(), 2 * once[k], rtol=1e-10, atol=1e-12, err_msg="%s input %d" % (name, k)
        )
