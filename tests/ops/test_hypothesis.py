"""Operations on shapes, batch sizes and values drawn by hypothesis.

Every registered op that has a case whose expression arguments all share one
shape and which takes no index or dimension arguments is tried on drawn
shapes (1-3 dims of 1-4, or the case's own), batch sizes (1-4) and a drawn choice of which
arguments have batch 1 (broadcast). Shapes the op rejects at creation are
skipped (ValueError/IndexError is the documented answer); for the rest
the value must match the numpy reference per batch element and a
random-direction finite difference must match backward().

DYN_HYPOTHESIS_EXAMPLES sets the examples per op (default 15; CI may raise it).
"""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import dyn as dy
from dyn.ops._registry import REGISTRY

from . import _harness as H

EXAMPLES = int(os.environ.get("DYN_HYPOTHESIS_EXAMPLES", "15"))


def _candidates():
    for name, spec in sorted(REGISTRY.items()):
        if spec.random or spec.batch_reference:
            continue
        for case in spec.cases:
            shapes = [tuple(s) for s in case.shapes]
            if len(set(shapes)) == 1 and not case.kwargs and case.grad:
                yield pytest.param(name, case, id=name)
                break


@pytest.mark.parametrize("name,case", list(_candidates()))
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)
@given(data=st.data())
def test_drawn_shapes(name, case, data, float64):
    spec = REGISTRY[name]
    dy.renew_cg()
    n = len(case.shapes)
    # the case's own shape among the drawn ones: an op that takes few shapes (lstm_step_weight: a
    # {4H,H} matrix) still meets valid examples, instead of hypothesis giving up as unsatisfiable
    own = st.just(list(case.shapes[0]))
    drawn = st.lists(st.integers(1, 4), min_size=1, max_size=3)
    shape = tuple(data.draw(st.one_of(own, drawn), label="shape"))
    batch = data.draw(st.integers(1, 4), label="batch")
    bds = [data.draw(st.sampled_from([1, batch]), label="bd%d" % k) for k in range(n)]
    rng = np.random.RandomState(data.draw(st.integers(0, 2**31 - 1), label="seed"))
    arrays = [
        H.sample(rng, shape + ((bd,) if bd > 1 else ()), H.domain_of(case, k, n)) for k, bd in enumerate(bds)
    ]
    try:
        xs, y = H.build(spec, case, arrays, bds, reusable=True)
    except (ValueError, IndexError):
        assume(False)  # a shape, batch or index combination the op documents as invalid
    out_bd = y.dim()[1]
    H.assert_same(y.npvalue(), H.expected(spec, case, arrays, bds), out_bd, name)

    loss = H.loss_of(y, seed=1)
    loss.backward(full=True)
    direction = [rng.uniform(-1, 1, size=a.shape) for a in arrays]
    analytic = sum(float(np.sum(x.gradient() * d)) for x, d in zip(xs, direction))
    eps = 1e-6

    def at(sign):
        for x, a, d in zip(xs, arrays, direction):
            x.set((a + sign * eps * d).ravel(order="F"))
        return loss.scalar_value()

    numeric = (at(1) - at(-1)) / (2 * eps)
    assert abs(numeric - analytic) <= 1e-5 * max(1.0, abs(numeric)), (name, shape, bds, numeric, analytic)
