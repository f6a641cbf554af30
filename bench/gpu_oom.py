"""Running out of GPU memory for real: a graph whose values cannot fit the card raises a
MemoryError naming the arena, the bytes asked and the device, and the process goes on with a new
graph, whose values are right. (tests/test_gpu.py checks the same with a simulated allocator
limit; this script fills the real card, so it runs alone, on a GPU machine.)

    python bench/gpu_oom.py [--gib-per-node 4]
"""
import argparse
import sys
import time

import numpy as np


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gib-per-node", type=float, default=4.0)
    args = p.parse_args(argv)
    import dyn as dy
    dy.init(devices="GPU:0")
    info = dy.get_device_info("GPU:0")
    total = getattr(info, "memory_total", 0) or (1 << 30)     # (the stand-in: no card)
    n = int(args.gib_per_node * (1 << 30) / 4)
    k = int(total / (n * 4)) + 4                      # more nodes than the card can hold
    print("card: %s, %.1f GiB; a graph of %d nodes of %.1f GiB each" % (
        getattr(info, "card", "?"), total / 2**30, k, n * 4 / 2**30))
    dy.renew_cg()
    xs = [dy.ones((n,)) for _ in range(k)]
    t0 = time.time()
    try:
        dy.esum([dy.sum_elems(x) for x in xs]).value()
    except MemoryError as e:
        print("MemoryError after %.1f s: %s" % (time.time() - t0, e))
        ok = "arena on GPU:0" in str(e) and "bytes" in str(e)
    else:
        print("no MemoryError: the graph fitted")
        ok = False
    del xs
    dy.renew_cg()
    v = np.arange(1000, dtype=np.float32)
    got = dy.sum_elems(dy.inputTensor(v) * 2).value()
    print("next graph: sum = %.1f (expected %.1f)" % (got, 2 * v.sum()))
    ok = ok and abs(got - 2 * v.sum()) < 1e-3 * abs(2 * v.sum())
    info = dy.get_device_info("GPU:0")
    print("after: dyn's pool %s bytes, free %.1f GiB" % (getattr(info, "memory_used", "?"),
                                                          getattr(info, "memory_free", 0) / 2**30))
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
