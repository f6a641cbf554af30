"""What a graph costs the GPU device in its steady state: device allocations, copies back to the
host (the only synchronising calls) and kernel launches per graph of a BiLSTM-tagger-like model,
and, on a CUDA GPU, cupy's memory pool before and after (no growth: no cudaMalloc per graph).

    python bench/gpu_steady.py [--graphs 20]      (DYN_GPU_STANDIN=1: on the numpy stand-in)
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import dyn as dy  # noqa: E402
from dyn._core.core import graph as _graph  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--graphs", type=int, default=20)
    args = p.parse_args(argv)
    dy.init(devices="GPU:0", random_seed=1)
    import dyn._core.gpu as _gpu
    bk = _gpu.current()
    m = dy.ParameterCollection()
    E = m.add_lookup_parameters((1000, 64))
    fwd = dy.VanillaLSTMBuilder(1, 64, 50, m)
    bwd = dy.VanillaLSTMBuilder(1, 64, 50, m)
    H = m.add_parameters((32, 100))
    Wo = m.add_parameters((10, 32))
    tr = dy.AdamTrainer(m)
    rs = np.random.RandomState(0)

    def graph():
        words = rs.randint(0, 1000, 20)
        dy.renew_cg()
        xs = [E[int(w)] for w in words]
        f = fwd.initial_state().transduce(xs)
        b = bwd.initial_state().transduce(xs[::-1])[::-1]
        Hp, Op = dy.parameter(H), dy.parameter(Wo)
        loss = dy.esum([dy.pickneglogsoftmax(Op * dy.tanh(Hp * dy.concatenate([a, c])), int(w) % 10)
                        for a, c, w in zip(f, b, words)])
        return loss

    for _ in range(3):            # warm: arenas and pools reach their size
        loss = graph()
        loss.forward()
        loss.backward()
        tr.update()
    bk.synchronize()
    pool = None
    if bk.is_gpu:
        import cupy
        pool = cupy.get_default_memory_pool()
        pool_before = pool.total_bytes()
    c0 = bk.counters()
    nodes = 0
    t0 = time.perf_counter()
    for _ in range(args.graphs):
        loss = graph()
        nodes += _graph.num_nodes()
        loss.forward()
        loss.backward()
        tr.update()
    t_host = time.perf_counter() - t0
    bk.synchronize()
    t_all = time.perf_counter() - t0
    c1 = bk.counters()
    d = {k: c1[k] - c0[k] for k in c0}
    print("device: %s (%s)" % (dy.current_config()["device"], bk.name))
    print("graphs: %d, nodes per graph: %.0f" % (args.graphs, nodes / args.graphs))
    print("device allocations by dyn per graph: %.2f" % (d["allocs"] / args.graphs))
    print("copies back to the host per graph (forward, backward, update; no value asked): %.2f"
          % (d["to_host_copies"] / args.graphs))
    print("kernel calls per node: %.2f" % (d["launches"] / max(nodes, 1)))
    print("inputs copied to the device per graph: %.2f" % (d["from_host_copies"] / args.graphs))
    print("host time per graph: %.1f ms (device finished %.1f ms after the host loop)"
          % (1e3 * t_host / args.graphs, 1e3 * (t_all - t_host)))
    if pool is not None:
        print("cupy memory pool: %d bytes before, %d after the %d graphs" % (pool_before, pool.total_bytes(),
                                                                             args.graphs))
    ok = d["allocs"] == 0 and d["to_host_copies"] == 0 and (pool is None or pool.total_bytes() == pool_before)
    print("steady state: %s" % ("no device allocation, no copy back" if ok else "NOT clean"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
