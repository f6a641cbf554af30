"""Finite-difference gradient checking for users (DyNet has one in C++)."""

from __future__ import annotations

import numpy as np

from dyn._core.core import expr as _expr
from dyn._core.core import graph as _graph


def check_grad(
    expr, params=None, *, eps=None, rtol=None, atol=None, max_elems=50, inputs=True, seed=0, verbose=False
):
    """Compare backward() with central finite differences.

    Two forms:

    * ``check_grad(loss)`` with a scalar Expression of the current graph: every
      parameter the graph reads (or those in ``params``) and, with
      ``inputs=True``, every input tensor is perturbed in place and the same
      graph recomputed (DyNet's C++ check_grad).
    * ``check_grad(loss_fn, params)`` with a function that builds a new graph and
      returns the loss: only ``params`` are checked.

    Use float64 for tight checks (``dy.set_precision("float64")`` before
    creating the parameters); in float32 the default tolerances are looser.

    Args:
        eps, rtol, atol: step and tolerances (defaults by precision).
        max_elems: at most this many randomly chosen elements per tensor.

    Returns:
        A list of (name, flat column-major index, backward, finite difference)
        for every element that disagrees; empty when the gradients are right.
        Parameter gradients accumulated before the call are left as they were.

    Example:
        >>> loss = dy.pickneglogsoftmax(W * x + b, 3)
        >>> assert dy.check_grad(loss) == []
    """
    f64 = _graph.get_dtype() == "float64"
    eps = eps if eps is not None else (1e-6 if f64 else 1e-2)
    rtol = rtol if rtol is not None else (1e-4 if f64 else 5e-2)
    atol = atol if atol is not None else (1e-6 if f64 else 1e-3)
    rng = np.random.RandomState(seed)
    rebuild = callable(expr) and not isinstance(expr, _expr.Expression)
    if rebuild:
        _graph.renew()
        loss = expr()
        param_list, input_list = list(params), []
    else:
        loss = expr
        graph_params, graph_inputs = _expr.graph_leaves()
        param_list = list(params) if params is not None else graph_params
        input_list = graph_inputs if inputs else []

    def value():
        if rebuild:
            _graph.renew()
            return expr().scalar_value()
        _graph.invalidate()
        return loss.scalar_value()

    saved = [p.grad_view().copy() for p in param_list]
    for p in param_list:
        p.write_grads(0)
    loss.backward(full=not rebuild)
    analytic = [p.grad_view().copy() for p in param_list]
    analytic += [np.ravel(_expr.wrap_node(nid).gradient(), order="F") for nid, _ in input_list]
    names = [p.name() for p in param_list] + ["input node %d" % nid for nid, _ in input_list]
    # parameters are changed through write_values (a device's host view is a copy); inputs are host
    # arrays the graph copies in again when it is recomputed
    views = [p.value_view() for p in param_list] + [data for _, data in input_list]
    owners = list(param_list) + [None] * len(input_list)
    bad = []
    try:
        for name, view, grad, owner in zip(names, views, analytic, owners):
            put = (lambda: None) if owner is None else (lambda o=owner, v=view: o.write_values(v))
            idx = np.arange(view.size) if view.size <= max_elems else rng.choice(view.size, max_elems, False)
            for i in idx:
                old = view[i]
                view[i] = old + eps
                put()
                up = value()
                view[i] = old - eps
                put()
                down = value()
                view[i] = old
                put()
                num = (up - down) / (2 * eps)
                if abs(num - grad[i]) > atol + rtol * max(abs(num), abs(grad[i])):
                    bad.append((name, int(i), float(grad[i]), float(num)))
                    if verbose:
                        print("%s[%d]: backward %.6g, finite differences %.6g" % bad[-1])
    finally:
        if not rebuild:
            _graph.invalidate()
        for p, g in zip(param_list, saved):
            p.write_grads(g)
    return bad
