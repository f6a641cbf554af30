"""bench/autobatch_ceiling.py replays the autobatched Tree-LSTM's matrix products: its account of
them (batch sizes, gate rows, input rows, FLOPs) must match the graph the engine runs."""

import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _bench():
    sys.path.insert(0, os.path.join(ROOT, "bench", "tasks"))
    try:
        path = os.path.join(ROOT, "bench", "autobatch_ceiling.py")
        spec = importlib.util.spec_from_file_location("autobatch_ceiling", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.pop(0)
    return mod


def test_the_replayed_products_are_the_graphs():
    bench = _bench()
    from common import Vocab, parse_tree

    trees = [parse_tree(s) for s in ("(1 (2 a) (3 (1 b) (2 c)))", "(4 (0 d) (3 e))", "(2 (1 (1 f)) (2 g))")]
    vw = Vocab(w for t in trees for w in t.leaves())
    vw.add("_UNK_")
    _, graph_loss = bench.model_and_loss(vw)
    groups = bench.tree_batches(graph_loss, trees)
    H, E = bench.H, bench.EMB
    # 7 leaves (P = 0: 3H gate rows over the embedding) and 5 inner nodes: "(1 (1 f))" is a unary
    # one (P = 1), the others have two children
    leaves = [(m, r, k) for m, r, k in groups if r == 3 * H]
    assert sum(m for m, _, _ in leaves) == 7 and all(k == E for _, _, k in leaves)
    inner = sorted((r, k) for m, r, k in groups if r != 3 * H for _ in range(m))
    assert inner == [(4 * H, H)] + [(5 * H, 2 * H)] * 4
    assert max(m for m, _, _ in leaves) == 7  # the leaves run as one batch
    p = bench.Products(groups)
    assert p.flop == 6 * (7 * 3 * H * E + 4 * H * H + 4 * 5 * H * 2 * H) and p.calls == 3 * len(groups)
    p.run()
