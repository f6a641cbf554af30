"""Fuzz driver over the operation registry, run as a subprocess by tests/test_fuzz.py.

    python -m tests._fuzz_driver --seed 1 --start 0 --count 1000 \\
        --progress /tmp/p.txt --report /tmp/r.jsonl
    python -m tests._fuzz_driver --seed 1 --only 417 -v     # replay one case

Case ``i`` of seed ``s`` is drawn from its own generator (``RandomState([s, i])``)
over the registry's metadata: an operation and one of its cases, then changes
to it: shapes (other sizes, an extra or missing dimension, a zero size, sizes
of 2^31 elements and more), batch sizes (mismatched ones too), precision
(float32/float64), values (NaN, +-inf, huge, tiny), and the non-expression
arguments (indices out of range and negative, 2^31 and 2^63, floats, strings,
None, empty and long lists, unknown keywords); sometimes with autobatching or
check_validity on. So a case replays alone, exactly, from its number.

Each case builds the expression, runs forward and backward(full=True) and
reads every gradient. The contract checked ("never crash, never lie"):

* an error is a Python exception of a documented class (ValueError,
  TypeError, IndexError, MemoryError, NotImplementedError, or RuntimeError
  with one of dyn's documented messages) -- never AttributeError, SystemError,
  OverflowError, KeyError, ZeroDivisionError ...;
* a value has the shape its Dim says, and equals the numpy reference when the
  inputs are clean (finite, in the op's domain) and the reference accepts them;
* a gradient has its input's shape;
* after any error (MemoryError included) a fresh graph computes right.

Before each case the driver writes its number and description to the progress
file (so a crash by a signal names the case); each contract violation is one
JSON line in the report. The process runs under an address-space limit
(--mem-limit-mb), so a huge allocation is a MemoryError, not a swap storm.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import resource
import sys
import traceback
import warnings

import numpy as np

ALLOWED = (ValueError, TypeError, IndexError, MemoryError, NotImplementedError)
# RuntimeErrors dyn documents (check_validity; a value of a multi-element tensor as a scalar)
RUNTIME_OK = ("NaN or Inf detected", "scalar_value:", "Stale Expression")

# the registry's entries for x * y, x + y, x - y are called as a user writes them
OPERATORS = {"*": operator.mul, "+": operator.add, "-": operator.sub}

HUGE_SHAPES = [
    (65536, 65537),  # 2^32 + 2^16 elements: int counts overflow
    (46341, 46341),  # just over 2^31
    (1 << 31,),
    (10**6, 10**6),
    (1 << 16, 1 << 15),  # exactly 2^31
    (1 << 15, 1 << 15),  # 2^30: under the limit, bigger than the memory cap
    (600, 500),  # allocated for real (1.2-2.4 MB a batch element)
]
BIG_INTS = [2**31 - 1, 2**31, 2**32 + 1, 2**63, -(2**31) - 1, -(2**63), 10**30]
WRONG = [1.5, "x", None, True, float("nan"), [], object()]


class Case:
    """One drawn case: everything needed to run it, and a short description."""

    def __init__(self, seed, index, ops):
        rng = np.random.RandomState([seed, index])
        self.index = index
        self.rng = rng
        self.name = ops[rng.randint(len(ops))]
        from dyn.ops._registry import REGISTRY

        self.spec = REGISTRY[self.name]
        self.base = self.spec.cases[rng.randint(len(self.spec.cases))]
        self.precision = "float64" if rng.rand() < 0.4 else "float32"
        self.autobatch = rng.rand() < 0.15
        self.check = rng.rand() < 0.1
        self.changes = []
        self.shapes = [tuple(s) for s in self.base.shapes]
        n = len(self.shapes)
        if rng.rand() < 0.35:
            self._mutate_shapes()
        batch = int(rng.choice([1, 1, 2, 3, 4]))
        self.bds = [int(rng.choice([1, batch])) for _ in range(n)]
        if n and rng.rand() < 0.05:
            k = rng.randint(n)
            self.bds[k] = batch + 1 + rng.randint(3)
            self.changes.append("batch[%d]=%d" % (k, self.bds[k]))
        self.out_bd = max(self.bds, default=1)
        self.kwargs = self.base.kwargs_for(self.out_bd)
        if self.kwargs and rng.rand() < 0.4:
            self._mutate_kwargs()
        elif rng.rand() < 0.02:
            self.kwargs["no_such_argument"] = 1
            self.changes.append("unknown keyword")
        # an expression argument replaced: by a non-expression, an expression
        # of the previous graph, or the first argument again (aliasing)
        self.swap = None
        if n and rng.rand() < 0.08:
            self.swap = (
                rng.randint(n),
                str(rng.choice(["number", "array", "none", "stale", "alias", "list"])),
            )
            self.changes.append("arg[%d]=%s" % self.swap)
        if self.spec.list_input and rng.rand() < 0.03:
            self.shapes, self.bds = [], []
            self.changes.append("empty list")
        self.values = "clean"
        if n and rng.rand() < 0.35:
            self.values = str(rng.choice(["nan1", "nan_all", "inf", "-inf", "huge", "tiny", "zero", "mixed"]))
        self.huge = [k for k, s in enumerate(self.shapes) if _total(s) * self.bds[k] > 4_000_000]

    # ---------------------------------------------------------------- shapes
    def _mutate_shapes(self):
        rng = self.rng
        if not self.shapes:
            return
        k = rng.randint(len(self.shapes))
        s = list(self.shapes[k])
        what = rng.randint(7)
        if what == 0 and s:
            s[rng.randint(len(s))] = int(rng.randint(1, 7))
        elif what == 1:
            s.append(int(rng.randint(1, 4)))
        elif what == 2 and len(s) > 1:
            s.pop()
        elif what == 3 and s:
            s[rng.randint(len(s))] = 0
        elif what == 4:
            s = list(HUGE_SHAPES[rng.randint(len(HUGE_SHAPES))])
        elif what == 5:
            s = [int(v) for v in rng.randint(1, 5, size=rng.randint(1, 5))]
        else:  # every argument changes the same way: keeps "same shape" ops valid
            d = int(rng.randint(1, 6))
            self.shapes = [tuple(d if i == 0 else v for i, v in enumerate(sh)) for sh in self.shapes]
            self.changes.append("dim0=%d for all" % d)
            return
        self.shapes[k] = tuple(s)
        self.changes.append("shape[%d]=%r" % (k, tuple(s)))

    # ---------------------------------------------------------------- kwargs
    def _mutate_kwargs(self):
        rng = self.rng
        keys = sorted(self.kwargs)
        key = keys[rng.randint(len(keys))]
        old = self.kwargs[key]
        if rng.rand() < 0.05:
            del self.kwargs[key]
            self.changes.append("drop %s" % key)
            return
        new = self._mutate_value(old)
        self.kwargs[key] = new
        self.changes.append("%s=%s" % (key, _short(new)))

    def _mutate_value(self, old):
        rng = self.rng
        r = rng.rand()
        if r < 0.1:
            return WRONG[rng.randint(len(WRONG))]
        if isinstance(old, bool):
            return not old
        if isinstance(old, (int, np.integer)):
            size = max((max(s) if s else 1) for s in self.shapes) if self.shapes else 4
            options = [-1, -2, -int(old) - 1, size, size + 1, 0, 7] + BIG_INTS
            v = options[rng.randint(len(options))]
            return np.int64(v) if rng.rand() < 0.1 and abs(v) < 2**62 else v
        if isinstance(old, float):
            options = [0.0, -1.0, -0.5, 1.0, 1.5, 1e300, -1e300, float("nan"), float("inf"), 1e-300]
            return options[rng.randint(len(options))]
        if isinstance(old, (list, tuple)):
            lst = list(old)
            what = rng.randint(6)
            if what == 0:
                lst = []
            elif what == 1 and lst:
                lst[rng.randint(len(lst))] = self._mutate_value(lst[0])
            elif what == 2:
                lst = lst * int(rng.choice([2, 50]))
            elif what == 3 and lst:
                lst = lst[:-1]
            elif what == 4:
                lst = lst + [lst[0] if lst else 0]
            else:
                return tuple(lst) if isinstance(old, list) else np.array(lst)
            return type(old)(lst) if isinstance(old, tuple) else lst
        if isinstance(old, str):
            return ["", "GPU:7", "cpu", "zero", "CPU:1"][rng.randint(5)]
        return WRONG[rng.randint(len(WRONG))]

    # ---------------------------------------------------------------- values
    def arrays(self):
        from tests.ops import _harness as H

        rng = self.rng
        out = []
        n = len(self.shapes)
        for k, (shape, bd) in enumerate(zip(self.shapes, self.bds)):
            if k in self.huge:
                out.append(None)
                continue
            full = tuple(shape) + ((bd,) if bd > 1 else ())
            a = H.sample(rng, full, H.domain_of(self.base, k, n)) if len(full) else np.array(rng.uniform())
            a = np.asarray(a, dtype=np.float64)
            v = self.values
            if a.size and v != "clean" and (v != "mixed" or rng.rand() < 0.5):
                flat = a.reshape(-1)
                at = rng.randint(flat.size)
                if v == "nan1":
                    flat[at] = np.nan
                elif v == "nan_all":
                    flat[:] = np.nan
                elif v == "inf":
                    flat[at] = np.inf
                elif v == "-inf":
                    flat[at] = -np.inf
                elif v == "huge":
                    flat[at] = 3e38 if rng.rand() < 0.5 else -1e300
                elif v == "tiny":
                    flat[at] = 1e-45
                elif v == "zero":
                    flat[:] = 0
                else:
                    flat[at] = [np.nan, np.inf, -np.inf, 1e30][rng.randint(4)]
            out.append(a)
        return out

    def describe(self):
        return "%s case=%d %s shapes=%r bds=%r kwargs=%s values=%s%s%s changes=[%s]" % (
            self.name,
            self.spec.cases.index(self.base),
            self.precision,
            self.shapes,
            self.bds,
            _short(self.kwargs),
            self.values,
            " autobatch" if self.autobatch else "",
            " check" if self.check else "",
            "; ".join(self.changes),
        )


def _total(shape):
    t = 1
    for d in shape:
        t *= int(d)
    return t


def _short(v):
    s = repr(v)
    return s if len(s) < 120 else s[:117] + "..."


FORBIDDEN = (AttributeError, SystemError, OverflowError, KeyError, ZeroDivisionError, AssertionError)


def _allowed(e):
    if isinstance(e, FORBIDDEN):
        return False
    if isinstance(e, ALLOWED) or type(e).__module__.startswith("dyn."):  # dyn.errors' classes
        return True
    if type(e) is RuntimeError:
        return str(e).startswith(RUNTIME_OK)
    return False


class Violation(Exception):
    pass


def run_case(c, dy, H):
    """Run one case; returns the phase it ended in ('value', or '<phase>:<exc class>')."""
    dy.set_precision(c.precision)
    dy.renew_cg(check_validity=c.check, autobatching=c.autobatch)
    phase = "inputs"
    try:
        arrays = c.arrays()
        xs = []
        for k, (a, bd) in enumerate(zip(arrays, c.bds)):
            if a is None:
                xs.append(dy.zeros(c.shapes[k], batch_size=c.bds[k]))
            else:
                xs.append(dy.inputTensor(a, batched=bd > 1))
        if c.swap is not None and c.swap[0] < len(xs):
            k, what = c.swap
            if what == "stale":
                old = xs[k]
                dy.renew_cg(check_validity=c.check, autobatching=c.autobatch)
                xs = [
                    dy.inputTensor(a, batched=bd > 1) if a is not None else None
                    for a, bd in zip(arrays, c.bds)
                ]
                xs = [
                    x if x is not None else dy.zeros(c.shapes[j], batch_size=c.bds[j])
                    for j, x in enumerate(xs)
                ]
                xs[k] = old
            elif what == "alias":
                xs[k] = xs[0]
                arrays[k] = arrays[0]
                c.shapes[k], c.bds[k] = c.shapes[0], c.bds[0]
            else:
                xs[k] = {"number": 1.5, "array": arrays[k], "none": None, "list": [xs[k]]}[what]
        phase = "create"
        fn = OPERATORS.get(c.name, c.spec.fn)
        y = fn(list(xs), **c.kwargs) if c.spec.list_input else fn(*xs, **c.kwargs)
        if not isinstance(y, dy.Expression):
            raise Violation("%s returned a %s, not an Expression" % (c.name, type(y).__name__))
        phase = "forward"
        dims, bd = y.dim()
        v = np.asarray(y.npvalue())
        if v.size != _total(dims) * bd:
            raise Violation("value has %d elements, its Dim %r x %d" % (v.size, dims, bd))
        phase = "backward"
        loss = dy.sum_batches(dy.sum_elems(y))
        loss.backward(full=True)
        for k, x in enumerate(xs):
            if c.swap is not None and c.swap[0] == k and c.swap[1] != "alias":
                continue  # accepted in place of an expression (a number): no gradient to read
            g = np.asarray(x.gradient())
            want = _total(c.shapes[k]) * c.bds[k]
            if g.size != want:
                raise Violation("gradient of argument %d has %d elements, want %d" % (k, g.size, want))
    except Violation:
        raise
    except Exception as e:  # noqa: BLE001 (the point: classify everything)
        if not _allowed(e):
            raise Violation(
                "%s at %s: %s\n%s" % (type(e).__name__, phase, e, "".join(traceback.format_exc(limit=6)))
            ) from None
        return "%s:%s" % (phase, type(e).__name__)
    _compare_reference(c, arrays, v, bd, H)
    return "value"


def _compare_reference(c, arrays, v, bd, H):
    """Never lie: with clean inputs, the value equals the numpy reference."""
    spec = c.spec
    if c.values != "clean" or spec.random or spec.reference is None or c.huge:
        return
    if c.swap is not None and c.swap[1] in ("number", "array", "none", "list"):
        return  # an argument replaced by a non-expression: the reference has the original array
    if any("noise" in k and v for k, v in c.kwargs.items()):
        return  # weight noise is random
    if any(len(s) != len(b) for s, b in zip(c.shapes, c.base.shapes)):
        # numpy aligns dimensions from the right, DyNet from the left: a
        # {1,2} against a {3,2,2} broadcasts as {1,2,1} here, (1,1,2) there
        return
    if any(a is None for a in arrays):
        return
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            want = H.expected(spec, _KwCase(c.kwargs), arrays, c.bds)
        except Exception:  # noqa: BLE001 (a reference that cannot take the changed case says nothing)
            return
    got = H.per_example(v, bd)
    if got.size != want.size:
        if c.changes:  # the reference may broadcast what dyn rightly rejects or reshapes
            return
        raise Violation("value has %d elements, the reference %d" % (got.size, want.size))
    big = 3e38 if c.precision == "float32" else 1e307
    if not np.all(np.isfinite(want)) or np.any(np.abs(want) > big):
        return  # float32 overflows where the float64 reference does not
    tol = 2e-3 if c.precision == "float32" else 1e-7
    scale = max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
    if got.shape[-1] != want.shape[-1]:
        return
    diff = np.max(np.abs(got.reshape(want.shape) - want)) if want.size else 0.0
    if not diff <= tol * scale:
        raise Violation("value differs from the numpy reference by %g (scale %g)" % (diff, scale))


class _KwCase:
    def __init__(self, kwargs):
        self.kwargs = kwargs

    def kwargs_for(self, b):
        return dict(self.kwargs)


def sanity(dy):
    """A fresh small graph computes right (after any error, MemoryError included)."""
    dy.set_precision("float32")
    dy.renew_cg()
    x = dy.inputTensor(np.array([0.5, -1.0, 2.0]))
    y = dy.sum_elems(dy.tanh(x) * 2)
    got = y.scalar_value()
    want = float(np.sum(np.tanh([0.5, -1.0, 2.0]) * 2))
    if abs(got - want) > 1e-5:
        raise Violation("a fresh graph after the case computes %r, want %r" % (got, want))
    y.backward()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--stride", type=int, default=1, help="run start, start+stride, ... (workers interleave)")
    ap.add_argument("--only", type=int, default=None, help="run this one case")
    ap.add_argument("--progress", default=None)
    ap.add_argument("--report", default=None)
    ap.add_argument("--mem-limit-mb", type=int, default=2500)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)

    if args.mem_limit_mb:
        lim = args.mem_limit_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    warnings.simplefilter("ignore")  # numpy references on NaN; dyn warns nothing here
    import dyn as dy
    from dyn.ops._registry import REGISTRY
    from tests.ops import _harness as H

    ops = sorted(REGISTRY)
    indices = (
        [args.only]
        if args.only is not None
        else range(args.start, args.start + args.count * args.stride, args.stride)
    )
    progress = open(args.progress, "w") if args.progress else None
    report = open(args.report, "a") if args.report else None
    outcomes = {}
    bad = 0
    for i in indices:
        c = Case(args.seed, i, ops)
        desc = c.describe()
        if progress:
            progress.seek(0)
            progress.write("%d %s\n" % (i, desc))
            progress.truncate()
            progress.flush()
        if args.verbose:
            print(i, desc, file=sys.stderr, flush=True)
        how = "violation"
        try:
            how = run_case(c, dy, H)
            outcomes[how] = outcomes.get(how, 0) + 1
            if how != "value" or c.check or c.autobatch:
                sanity(dy)
        except Violation as e:
            bad += 1
            line = {"case": i, "seed": args.seed, "desc": desc, "error": str(e)}
            if report:
                report.write(json.dumps(line) + "\n")
                report.flush()
            print("VIOLATION", json.dumps(line), file=sys.stderr, flush=True)
            try:
                sanity(dy)
            except Exception:  # noqa: BLE001 (already reported; the next case starts fresh)
                pass
        if args.verbose:
            print("   ->", how, file=sys.stderr, flush=True)
    if progress:
        progress.seek(0)
        progress.write("done\n")
        progress.truncate()
        progress.close()
    summary = {"cases": len(indices), "violations": bad, "outcomes": outcomes}
    print("SUMMARY", json.dumps(summary, sort_keys=True), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
