"""Builds inputs and runs one registered operation for the generated tests."""

from __future__ import annotations

import numpy as np

import dyn as dy

BATCH = 3


def domain_of(case, k, n):
    d = case.domain
    if isinstance(d, str):
        return d
    if isinstance(d, (tuple, list)) and len(d) == 2 and all(isinstance(v, (int, float)) for v in d):
        return tuple(d)
    return d[k]


def sample(rng, shape, domain):
    if domain == "positive":
        return rng.uniform(0.5, 2.0, size=shape)
    if domain == "nonzero":
        return rng.choice([-1.0, 1.0], size=shape) * rng.uniform(0.5, 1.5, size=shape)
    if isinstance(domain, tuple):
        return rng.uniform(domain[0], domain[1], size=shape)
    # "real": keep away from 0 so kinks (rectify, abs) are not straddled by
    # finite differences, and values distinct so max/sort ties do not occur
    x = rng.uniform(-1.5, 1.5, size=shape)
    return np.where(np.abs(x) < 0.1, x + np.sign(x + 1e-12) * 0.2, x)


def batch_sizes(mode, n):
    kind, k = mode
    if kind == "none":
        return [1] * n
    if kind == "all":
        return [BATCH] * n
    return [1 if i == k else BATCH for i in range(n)]


def make_arrays(spec, case, mode, seed):
    rng = np.random.RandomState(seed)
    n = len(case.shapes)
    bds = batch_sizes(mode, n)
    arrays = []
    for k, (shape, bd) in enumerate(zip(case.shapes, bds)):
        shape = tuple(shape) + ((bd,) if bd > 1 else ())
        arrays.append(sample(rng, shape, domain_of(case, k, n)))
    return arrays, bds


def build(spec, case, arrays, bds, reusable=False):
    """Inputs and the op's output in the current graph."""
    xs = [dy.inputTensor(a, batched=bd > 1, reusable_expr=reusable) for a, bd in zip(arrays, bds)]
    out_bd = max(bds, default=1)
    kwargs = case.kwargs_for(out_bd)
    y = spec.fn(list(xs), **kwargs) if spec.list_input else spec.fn(*xs, **kwargs)
    return xs, y


def per_example(a, bd):
    """Array with a trailing batch axis always."""
    return a if bd > 1 else a[..., None]


def strip(shape):
    shape = tuple(shape)
    while len(shape) > 1 and shape[-1] == 1:
        shape = shape[:-1]
    return shape


def expected(spec, case, arrays, bds):
    """Reference output with a trailing batch axis."""
    out_bd = max(bds, default=1)
    kwargs = case.kwargs_for(out_bd)
    if spec.batch_reference:
        return np.asarray(spec.reference(*[per_example(a, bd) for a, bd in zip(arrays, bds)], **kwargs))
    outs = []
    for b in range(out_bd):
        xs = [a[..., b] if bd > 1 else a for a, bd in zip(arrays, bds)]
        outs.append(np.asarray(spec.reference(*xs, **kwargs), dtype=np.float64))
    return np.stack(outs, axis=-1)


def assert_same(actual, want, bd, what, rtol=1e-9, atol=1e-10):
    """Compare a value (trailing batch axis only if bd > 1) with want (always batched)."""
    got = per_example(np.asarray(actual), bd)
    assert strip(got.shape[:-1]) == strip(want.shape[:-1]) and got.shape[-1] == want.shape[-1], (
        "%s: shape %r, reference %r" % (what, got.shape, want.shape)
    )
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=rtol, atol=atol, err_msg=what)


def loss_of(y, seed):
    """sum(R * y) for a fixed random R: a scalar whose gradient w.r.t. y is R."""
    (dims, bd) = y.dim()
    r = np.random.RandomState(seed).uniform(-1, 1, size=tuple(dims) + ((bd,) if bd > 1 else ()))
    R = dy.inputTensor(r, batched=bd > 1)
    return dy.sum_batches(dy.sum_elems(dy.cmult(y, R)))


def numeric_grad(x_expr, array, loss, eps=1e-6):
    flat = array.ravel(order="F").copy()
    g = np.zeros_like(flat)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        x_expr.set(flat)
        up = loss.scalar_value()
        flat[i] = old - eps
        x_expr.set(flat)
        down = loss.scalar_value()
        flat[i] = old
        g[i] = (up - down) / (2 * eps)
    x_expr.set(flat)
    return g.reshape(array.shape, order="F")
