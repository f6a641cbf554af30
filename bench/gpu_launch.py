"""What a small operation costs: microseconds per node of building and running a graph (forward and
backward) for dyn on the CPU and on the GPU, and per operation for PyTorch eager on the CPU and
on the same GPU (autograd), in one run.

The graph is a chain of `--layers` small layers, h = tanh(W h + b) with W 64x64 and h of 64 (three
nodes or operations a layer: product, sum, tanh), then the sum of h; one graph per repetition,
with its backward pass. On a GPU each timing ends when the device has finished (the loss is read
back). The figure is the host time per node: at this size the arithmetic is a few nanoseconds, so
what is measured is what a toolkit spends around each kernel (Python, bookkeeping, launches).

    python bench/gpu_launch.py [--layers 50] [--reps 30] [--devices CPU,GPU:0] [--no-torch]
"""
import argparse
import importlib.util
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

DIM = 64


def best_time(one, reps):
    """Seconds per call of one(): 3 calls to warm up, then the best of 3 rounds of reps calls (one
    reads its loss back, so a GPU has finished each)."""
    for _ in range(3):
        one()
    best = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            one()
        best.append((time.perf_counter() - t0) / reps)
    return min(best)


def time_dyn(device, layers, reps):
    import dyn as dy
    dy.init(devices=device, random_seed=1)
    m = dy.ParameterCollection()
    rs = np.random.RandomState(0)
    Ws = [m.parameters_from_numpy(rs.uniform(-0.1, 0.1, (DIM, DIM))) for _ in range(layers)]
    bs = [m.parameters_from_numpy(rs.uniform(-0.1, 0.1, DIM)) for _ in range(layers)]
    x0 = rs.uniform(-1, 1, DIM)

    def one():
        dy.renew_cg()
        h = dy.inputVector(x0)
        for W, b in zip(Ws, bs):
            h = dy.tanh(W * h + b)
        loss = dy.sum_elems(h)
        v = loss.value()
        loss.backward()
        return v

    per_graph = best_time(one, reps)
    dy.init(devices="CPU")
    return per_graph / (3 * layers + 2) * 1e6


def time_torch(device, layers, reps):
    import torch
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    Ws = [(torch.rand(DIM, DIM, generator=g, dtype=torch.float32) * 0.2 - 0.1).to(device).requires_grad_()
          for _ in range(layers)]
    bs = [(torch.rand(DIM, generator=g) * 0.2 - 0.1).to(device).requires_grad_() for _ in range(layers)]
    x0 = (torch.rand(DIM, generator=g) * 2 - 1).to(device)

    def one():
        h = x0
        for W, b in zip(Ws, bs):
            h = torch.tanh(W @ h + b)
        loss = h.sum()
        loss.backward()
        return loss.item()

    return best_time(one, reps) / (3 * layers + 1) * 1e6


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=50)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--devices", default="CPU,GPU:0")
    p.add_argument("--no-torch", action="store_true")
    args = p.parse_args(argv)
    have_torch = not args.no_torch and importlib.util.find_spec("torch") is not None
    res = {}
    for dev in args.devices.split(","):
        res["dyn " + dev] = time_dyn(dev, args.layers, args.reps)
        print("dyn %-6s %8.2f us per node (forward + backward)" % (dev, res["dyn " + dev]), flush=True)
        if have_torch:
            import torch
            tdev = "cpu" if dev == "CPU" else "cuda"
            if tdev == "cuda" and not torch.cuda.is_available():
                print("PyTorch cuda: no usable CUDA GPU here")
                continue
            res["torch " + tdev] = time_torch(tdev, args.layers, args.reps)
            print("PyTorch %-4s %8.2f us per operation (forward + backward)" % (tdev, res["torch " + tdev]),
                  flush=True)
            ratio = res["dyn " + dev] / res["torch " + tdev]
            print("  dyn / PyTorch per-node cost on %s: %.2f" % (dev, ratio))
    return 0


if __name__ == "__main__":
    sys.exit(main())
