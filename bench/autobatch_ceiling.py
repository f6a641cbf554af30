"""The most automatic batching can gain on the Tree-LSTM: its matrix products alone, against dyn unbatched.

The project's target asks the autobatched Tree-LSTM (bench/autobatch.py's model: SST, embedding 128,
dy.NaryTreeLSTMBuilder(2, 1, 128, 128), sparse Adam, 64 trees per graph) for 3x dyn's own
unbatched speed. Whatever the engine does, an autobatched step has to do its batches' matrix
products. This script takes the batches the engine forms for each graph (``_autobatch.batches()``
after the forward pass; a tree node that runs alone counts as a batch of one) and replays their
products with the BLAS dyn calls (scipy's OpenBLAS), one call each, as the fused tree kernel does
them (dyn/_core/cpu/treelstm.pyx): per batch of m nodes with P children each, R = (3 + P) H gate rows
(i, o, u and a forget gate per child) and K = P H children's state rows (inner nodes) or the
embedding size (leaves, P = 0),

    forward    gates  (R x m)  = W (R x K) . X (K x m)
    backward   dX     (K x m)  = W^T . dgates
               dW     (R x K) += dgates . X^T

and times them against dyn's training step (build, forward, backward, update) with autobatching
off and on, on the same graphs, in rounds whose order rotates. The ceiling is the unbatched step
over the products alone, and over the products plus the unbatched step's graph building (the same
Python code and nodes as the autobatched one's). Left out, so the ceilings are if anything too
high: the output layer's products (5 x 128 per tree), every elementwise operation, scheduling,
the sparse update; the Python cost of each BLAS call (measured on 1 x 1 products) is subtracted.
Last, the products' FLOPs at the sgemm peak (a 2048 x 2048 product, measured every round): the
ceiling even if every small product ran as fast as a large one.

    python bench/autobatch_ceiling.py [--graphs 20] [--rounds 5] [--data DIR]
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy loads its BLAS: single-threaded, as bench/autobatch.py

import argparse  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "tasks"))

import common  # noqa: E402
import numpy as np  # noqa: E402
from scipy.linalg import blas  # noqa: E402
from settings import TreeLSTM  # noqa: E402

import dyn as dy  # noqa: E402
from dyn._core.core import autobatch as _autobatch  # noqa: E402
from dyn._core.core import graph as _graph  # noqa: E402

H, EMB, NLABELS = TreeLSTM.hidden, TreeLSTM.wembed, TreeLSTM.labels


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=None, help="data folder (default: $DYN_DATA, else ../shared/data)")
    p.add_argument("--graphs", type=int, default=20, help="minibatches (graphs) timed")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    p.add_argument("--batch", type=int, default=64, help="trees per graph")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="a few small graphs (smoke run)")
    args = p.parse_args(argv)
    args.data = args.data or common.default_data_dir()
    if args.quick:
        args.graphs, args.rounds, args.batch = 3, 2, 8
    return args


def model_and_loss(vw):
    model = dy.ParameterCollection()
    trainer = common.dyn_trainer(dy, model, sparse=True)
    E = model.add_lookup_parameters((len(vw), EMB))
    builder = dy.NaryTreeLSTMBuilder(2, 1, EMB, H, model)
    pW, pb = model.add_parameters((NLABELS, H)), model.add_parameters(NLABELS)
    UNK = vw.w2i["_UNK_"]

    def encode(tree):
        if tree.is_leaf():
            return builder.add_input(E[vw.w2i.get(tree.word, UNK)])
        return builder.compose([encode(c) for c in tree.children])

    def graph_loss(batch, autobatching):
        dy.renew_cg(autobatching=autobatching)
        out = []
        for tree in batch:
            W, b = dy.parameter(pW), dy.parameter(pb)
            out.append(dy.pickneglogsoftmax(dy.affine_transform([b, W, encode(tree).output()]), tree.label))
        return dy.esum(out)

    return trainer, graph_loss


def tree_batches(graph_loss, batch):
    """(m, R, K) of every batch of tree nodes the engine runs in this graph's forward pass."""
    graph_loss(batch, True).value()
    nodes = _graph.describe()
    batched, out = set(), []
    for members in _autobatch.batches():
        if nodes[members[0]][0] == "nary_tree_lstm":
            out.append((len(members),) + _shape(nodes, members[0]))
            batched.update(members)
    alone = [i for i, n in enumerate(nodes) if n[0] == "nary_tree_lstm" and i not in batched]
    out += [(1,) + _shape(nodes, i) for i in alone]
    return out


def _shape(nodes, i):
    """(R, K): gate rows, and rows of X (the leaf's embedding, or the children's stacked h)."""
    args = nodes[i][1]  # (U, b, Wx, x) for a leaf, (U, b, child, ...) for an inner node
    if nodes[args[2]][0] == "tree_weights":
        return 3 * H, EMB
    P = len(args) - 2
    return (3 + P) * H, P * H


class Products:
    """One graph's matrix products, on preallocated float32 Fortran arrays."""

    def __init__(self, groups):
        self.groups = groups
        mmax = max(m for m, _, _ in groups)
        rng = np.random.RandomState(0)
        f = lambda r, c: np.asfortranarray(rng.uniform(-0.1, 0.1, (r, c)).astype(np.float32))  # noqa: E731
        shapes = sorted({(r, k) for _, r, k in groups})
        self.W = {rk: f(*rk) for rk in shapes}
        self.dW = {rk: f(*rk) for rk in shapes}
        self.X = {k: f(k, mmax) for _, k in shapes}
        self.dX = {k: f(k, mmax) for _, k in shapes}
        self.G = {r: f(r, mmax) for r, _ in shapes}
        self.flop = sum(3 * 2 * r * k * m for m, r, k in groups)
        self.calls = 3 * len(groups)

    def run(self):
        sgemm = blas.sgemm
        for m, r, k in self.groups:
            W, dW, G = self.W[r, k], self.dW[r, k], self.G[r][:, :m]
            X, dX = self.X[k][:, :m], self.dX[k][:, :m]
            sgemm(1.0, W, X, 0.0, G, overwrite_c=True)
            sgemm(1.0, W, G, 0.0, dX, trans_a=True, overwrite_c=True)
            sgemm(1.0, G, X, 1.0, dW, trans_b=True, overwrite_c=True)


def call_overhead(n=20000):
    """Seconds per scipy sgemm call on 1 x 1 matrices (the Python wrapper's cost)."""
    a = np.ones((1, 1), np.float32, order="F")
    c = np.zeros((1, 1), np.float32, order="F")
    best = 1e9
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            blas.sgemm(1.0, a, a, 0.0, c, overwrite_c=True)
        best = min(best, (time.perf_counter() - t) / n)
    return best


def sgemm_peak(n=2048, repeats=5):
    """FLOP/s of the best of a few large square float32 products (the same BLAS)."""
    a = np.asfortranarray(np.random.RandomState(1).uniform(-1, 1, (n, n)).astype(np.float32))
    c = np.zeros((n, n), np.float32, order="F")
    best = 1e9
    for _ in range(repeats):
        t = time.perf_counter()
        blas.sgemm(1.0, a, a, 0.0, c, overwrite_c=True)
        best = min(best, time.perf_counter() - t)
    return 2.0 * n**3 / best


def main(argv=None):
    args = parse_args(argv)
    train, _, vw = common.sst(argparse.Namespace(data=args.data, quick=args.quick))
    trees = list(train)
    random.Random(args.seed).shuffle(trees)
    sys.setrecursionlimit(10000)
    trainer, graph_loss = model_and_loss(vw)
    graphs = [trees[i * args.batch : (i + 1) * args.batch] for i in range(args.graphs)]
    prods = [Products(tree_batches(graph_loss, g)) for g in graphs]
    overhead = call_overhead()

    def step_pass(autobatching):
        """Seconds per graph: the whole training step, and its graph building alone."""
        build = 0.0
        t = time.perf_counter()
        for g in graphs:
            t0 = time.perf_counter()
            loss = graph_loss(g, autobatching)
            build += time.perf_counter() - t0
            loss.value()
            loss.backward()
            trainer.update()
        return (time.perf_counter() - t) / len(graphs), build / len(graphs)

    def products_pass():
        t = time.perf_counter()
        for p in prods:
            p.run()
        return (time.perf_counter() - t - overhead * sum(p.calls for p in prods)) / len(prods), 0.0

    passes = {"off": lambda: step_pass(False), "on": lambda: step_pass(True), "products": products_pass}
    for f in passes.values():
        f()
    rounds, peaks = [], []
    for r in range(args.rounds):
        peaks.append(sgemm_peak())
        names = list(passes)[r % 3 :] + list(passes)[: r % 3]  # the order rotates every round
        rounds.append({k: passes[k]() for k in names})
    med = lambda f: statistics.median(f(x) for x in rounds)  # noqa: E731
    spread = lambda f: "%.2f-%.2f" % (min(f(x) for x in rounds), max(f(x) for x in rounds))  # noqa: E731
    off, on, mm = (med(lambda x, k=k: x[k][0]) for k in ("off", "on", "products"))
    build = med(lambda x: x["off"][1])
    actual = lambda x: x["off"][0] / x["on"][0]  # noqa: E731
    ceil = lambda x: x["off"][0] / x["products"][0]  # noqa: E731
    ceil_b = lambda x: x["off"][0] / (x["products"][0] + x["off"][1])  # noqa: E731
    flop = sum(p.flop for p in prods) / len(prods)
    nb = sum(len(p.groups) for p in prods) / len(prods)
    print(
        "Tree-LSTM, %d trees per graph, %d graphs, %d rounds (single-threaded); ms per graph:"
        % (args.batch, args.graphs, args.rounds)
    )
    print(
        "  dyn unbatched step %.2f (graph building %.2f); autobatched step %.2f"
        % (off * 1e3, build * 1e3, on * 1e3)
    )
    print("  the autobatched graph's tree-node batches: %.1f per graph (batches of one included)" % nb)
    print(
        "  their matrix products alone: %.1f MFLOP, %.2f ms (%.0f GFLOP/s; BLAS call overhead of "
        "%.2f us per call subtracted)" % (flop / 1e6, mm * 1e3, flop / mm / 1e9, overhead * 1e6)
    )
    print("  autobatched / unbatched speed: measured %.2fx (rounds %s)" % (med(actual), spread(actual)))
    print("  ceiling, products only: %.2fx (rounds %s)" % (med(ceil), spread(ceil)))
    print("  ceiling, products + graph building: %.2fx (rounds %s)" % (med(ceil_b), spread(ceil_b)))
    peak = statistics.median(peaks)
    at_peak = flop / peak
    print(
        "  at the sgemm peak of this run (large square products, %.0f GFLOP/s) the products would take "
        "%.2f ms: ceiling with graph building %.2fx" % (peak / 1e9, at_peak * 1e3, off / (at_peak + build))
    )
    print("  3x needs the whole autobatched step within %.2f ms" % (off / 3 * 1e3))


if __name__ == "__main__":
    main()
