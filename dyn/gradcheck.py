"""Finite-difference gradient checking for users (DyNet has one in C++)."""

from __future__ import annotations

import numpy as np

from dyn._core import _graph


def check_grad(loss_fn, params, eps=1e-4, rtol=1e-3, atol=1e-5, max_elems=50, seed=0, verbose=False):
    """Compare backward() with central differences for each parameter.

    Args:
        loss_fn: a function of no arguments that builds the graph (it may call
            renew_cg) and returns a scalar Expression.
        params: the Parameters/LookupParameters to check.
        eps, rtol, atol: step and tolerances (use float64 for tight checks:
            ``dy.set_precision("float64")`` before creating the parameters).
        max_elems: check at most this many randomly chosen elements each.

    Returns:
        A list of (parameter name, flat index, analytic, numeric) that disagree;
        empty when the gradients are right. With verbose=True each is printed.
    """
    rng = np.random.RandomState(seed)
    for p in params:
        p.grad_view()[:] = 0
    _graph.renew()
    loss_fn().backward()
    analytic = [p.grad_view().copy() for p in params]
    bad = []
    for p, ga in zip(params, analytic):
        v = p.value_view()
        idx = np.arange(v.size) if v.size <= max_elems else rng.choice(v.size, max_elems, replace=False)
        for i in idx:
            old = v[i]
            v[i] = old + eps
            _graph.renew()
            up = loss_fn().scalar_value()
            v[i] = old - eps
            _graph.renew()
            down = loss_fn().scalar_value()
            v[i] = old
            num = (up - down) / (2 * eps)
            if abs(num - ga[i]) > atol + rtol * max(abs(num), abs(ga[i])):
                bad.append((p.name(), int(i), float(ga[i]), float(num)))
                if verbose:
                    print("%s[%d]: backward %.6g, finite differences %.6g" % bad[-1])
        p.grad_view()[:] = 0
    return bad
