"""NaN in, NaN out: every registered operation, forward and backward.

The rule (docs/operations.md): an output element is NaN when an input element
it depends on is NaN. Max/min-like ops (max_dim, min_dim, bmax, emax,
maxpooling2d, kmax_pooling ...) treat NaN as the winner rather than skipping
it as IEEE fmax/fmin do; rectify and the hinge losses pass NaN through instead
of clamping it to 0. argmax returns a one-hot at the first NaN, as
numpy.argmax.

Forward is checked two ways for every op, case, batch mode and precision:
all inputs NaN must give an all-NaN output, and one NaN in one argument must
give NaN wherever the numpy reference fed the same input gives NaN.

Backward: with one NaN in one argument, every gradient element is either NaN
or the gradient a finite value in the NaN's place gives (so it did not depend
on the NaN: sums, picks, concatenations and the selected element of a max
route the incoming gradient unchanged). A finite number computed from a NaN
(rectify's old 0) fails.
"""

import warnings

import numpy as np
import pytest

import dyn as dy
from dyn.ops._registry import REGISTRY

from . import _harness as H

# arguments an op's value does not depend on in one case, though the numpy
# reference multiplies them by zero: a tree node without children has no
# U h term
UNUSED = {("child_sum_tree_lstm", 1): {2}}

OPS = sorted(name for name, spec in REGISTRY.items() if not spec.random)

# ops whose numpy reference cannot take NaN (sparsemax's sorts out an empty
# support): the NaN must reach every output of its batch element
ALL_OF_BATCH_ELEMENT = {"sparsemax", "sparsemax_loss"}


def _modes(case):
    out = [("none", None)]
    if "all" in case.batches and case.shapes:
        out.append(("all", None))
    return out


def _replacements(case, k, n):
    d = H.domain_of(case, k, n)
    if d == "positive":
        return [1e-3, 50.0]
    if isinstance(d, tuple):
        return [float(d[0]), float(d[1])]
    return [-50.0, 50.0]


def _run(spec, case, arrays, bds, loss_seed=None):
    """Output value and (when loss_seed is given) every input's gradient."""
    dy.renew_cg()
    xs, y = H.build(spec, case, arrays, bds)
    v = np.asarray(y.npvalue(), dtype=np.float64)
    if loss_seed is None:
        return v, y, None
    H.loss_of(y, seed=loss_seed).backward(full=True)
    return v, y, [np.asarray(x.gradient(), dtype=np.float64) for x in xs]


def _reference(spec, case, arrays, bds):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return H.expected(spec, case, arrays, bds)
        except (IndexError, ValueError, np.linalg.LinAlgError):
            return None


def _where_nan(name, case, arrays, bds, y, v):
    """Boolean mask (with a trailing batch axis) of the outputs that must be NaN."""
    spec = REGISTRY[name]
    want = _reference(spec, case, arrays, bds)
    out_bd = y.dim()[1]
    got = H.per_example(v, out_bd)
    if name in ALL_OF_BATCH_ELEMENT:
        mask = np.zeros(got.shape, dtype=bool)
        for b in range(out_bd):
            if any(np.isnan(a[..., b] if bd > 1 else a).any() for a, bd in zip(arrays, bds)):
                mask[..., b] = True
        return got, mask
    assert want is not None, "%s: the numpy reference failed on NaN input" % name
    return got.reshape(want.shape), np.isnan(want)


def _cases(name):
    spec = REGISTRY[name]
    for ci, case in enumerate(spec.cases):
        if not case.shapes:
            continue
        for mode in _modes(case):
            arrays, bds = H.make_arrays(spec, case, mode, seed=ci)
            yield ci, case, mode, arrays, bds


@pytest.fixture(params=["float32", "float64"])
def precision(request):
    dy.set_precision(request.param)
    try:
        yield request.param
    finally:
        dy.set_precision("float32")


@pytest.mark.parametrize("name", OPS)
def test_all_nan_in_gives_nan_out(name, precision):
    spec = REGISTRY[name]
    for ci, case, mode, arrays, bds in _cases(name):
        nans = [np.full_like(a, np.nan) for a in arrays]
        v, _, grads = _run(spec, case, nans, bds, loss_seed=3)
        what = "%s case %d %s %s" % (name, ci, mode[0], precision)
        if name == "argmax":
            # a one-hot at the first NaN, as numpy.argmax
            flat = H.per_example(v, max(bds))
            assert np.all(flat[0] == 1) and np.all(flat[1:] == 0), what
            continue
        got = H.per_example(v, max(bds, default=1))
        want = _reference(spec, case, nans, bds)
        # outputs that are constants (log_softmax's -inf outside `restrict`)
        # need not be NaN: the reference gives the same constant there
        const = np.zeros(got.shape, dtype=bool) if want is None else (want.reshape(got.shape) == got)
        assert (np.isnan(got) | const).all(), "%s: all-NaN input gave %r" % (what, v)
        assert all(np.isfinite(g).all() or np.isnan(g).any() for g in grads), what


@pytest.mark.parametrize("name", OPS)
def test_one_nan_forward_and_backward(name, precision):
    spec = REGISTRY[name]
    checked = 0
    for ci, case, mode, arrays, bds in _cases(name):
        _, _, clean = _run(spec, case, arrays, bds, loss_seed=5)
        for k in range(len(arrays)):
            for pos in sorted({0, arrays[k].size // 2, arrays[k].size - 1}):
                what = "%s case %d %s: NaN at %d of argument %d (%s)" % (name, ci, mode[0], pos, k, precision)
                bad = [a.copy() for a in arrays]
                bad[k].flat[pos] = np.nan
                v, y, grads = _run(spec, case, bad, bds, loss_seed=5)
                if name == "argmax":
                    first = H.per_example(bad[0], max(bds))
                    for b in range(first.shape[-1]):
                        col = first[..., b].ravel(order="F")
                        hot = H.per_example(v, y.dim()[1])[..., b].ravel(order="F")
                        at = int(np.argmax(col))  # numpy: the first NaN, else the first maximum
                        assert hot[at] == 1 and hot.sum() == 1, what
                    checked += 1
                    continue
                got, must = _where_nan(name, case, bad, bds, y, v)
                if k in UNUSED.get((name, ci), ()):
                    must[...] = False
                missing = must & ~np.isnan(got)
                assert not missing.any(), "%s: outputs %s finite, %r" % (what, np.argwhere(missing), got)

                # backward: NaN, or what a finite value in its place gives
                options = []
                for r in _replacements(case, k, len(arrays)):
                    alt = [a.copy() for a in arrays]
                    alt[k].flat[pos] = r
                    options.append(_run(spec, case, alt, bds, loss_seed=5)[2])
                options.append(clean)
                tol = 1e-4 if precision == "float32" else 1e-9
                for j, g in enumerate(grads):
                    ok = np.isnan(g)
                    for opt in options:
                        ok |= np.isclose(g, opt[j], rtol=tol, atol=tol)
                    assert ok.all(), (
                        "%s: gradient of argument %d is finite where it depends on the NaN: %r"
                        % (
                            what,
                            j,
                            g,
                        )
                    )
                checked += 1
    assert checked == sum(len({0, a.size // 2, a.size - 1}) for *_, arrays, _ in _cases(name) for a in arrays)


@pytest.mark.parametrize("autobatching", [False, True])
def test_check_validity_names_the_first_node(autobatching):
    """renew_cg(check_validity=True) stops at the node that produced the
    first NaN or Inf (its inputs finite), naming it, also under autobatching
    where several chains run as one."""
    dy.renew_cg(check_validity=True, autobatching=autobatching)
    xs = [dy.inputTensor(np.array([1.0, 2.0, 3.0 - i])) for i in range(4)]
    outs = [dy.tanh(dy.log(x)) * 2 for x in xs]  # log(0) = -inf in the 4th chain only
    with pytest.raises(RuntimeError, match=r"NaN or Inf detected: first in node \d+ \(log, dim \{3\}\)"):
        dy.esum(outs).npvalue()

    dy.renew_cg(check_validity=True, autobatching=autobatching)
    x = dy.inputTensor(np.array([1.0, -1.0]))
    y = dy.rectify(dy.sqrt(x))  # sqrt(-1) = NaN, and rectify keeps it
    with pytest.raises(RuntimeError, match=r"first in node 1 \(sqrt"):
        y.npvalue()

    dy.renew_cg(check_validity=True, autobatching=autobatching)
    x = dy.inputTensor(np.array([1.0, 2.0]))
    assert dy.sum_elems(dy.rectify(dy.log(x))).scalar_value() == pytest.approx(np.log(2.0))
    dy.renew_cg()


def test_nan_wins_in_max_like_ops():
    x = dy.inputTensor(np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]]))
    assert np.isnan(dy.max_dim(x, 1).npvalue()[0]) and dy.max_dim(x, 1).npvalue()[1] == 6
    assert np.isnan(dy.min_dim(x, 1).npvalue()[0]) and dy.min_dim(x, 1).npvalue()[1] == 4
    assert np.isnan(dy.rectify(x).npvalue()[0, 1])
    assert np.isnan(dy.bmax(x, dy.zeros((2, 3))).npvalue()[0, 1])
    assert np.isnan(dy.bmin(dy.zeros((2, 3)), x).npvalue()[0, 1])
    row = dy.inputTensor(np.array([[1.0, 5.0, np.nan, 2.0, 3.0]]))
    np.testing.assert_array_equal(dy.kmax_pooling(row, 2, d=1).npvalue(), [[5.0, np.nan]])
    y = dy.argmax(dy.inputTensor(np.array([1.0, 9.0, np.nan, np.nan])), "zero_gradient")
    np.testing.assert_array_equal(y.npvalue(), [0, 0, 1, 0])
