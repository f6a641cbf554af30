"""Graph overhead: microseconds per node to build, run forward and backward.

The model is the worst case for a dynamic toolkit: a long chain of tiny nodes,
``h = tanh(W * h + b)`` on 32-dim vectors, N steps, then ``sum_elems(h)`` as the
loss. Each step is 3 graph nodes (matrix product, add, tanh), so the arithmetic is
negligible and what is measured is the per-node cost of the toolkit itself.

For dyn each phase is timed separately: build (creating the expressions),
forward (``loss.value()``) and backward (``loss.backward()``). PyTorch eager
builds its graph while it computes, so its "forward" is build and forward
together; ratios are reported for build+forward, backward and total.

Runs of dyn and PyTorch alternate so both see the same machine state; every
figure is the median of ``--repeats`` runs after one warm-up run. Everything is
single-threaded. Output is ``key=value`` lines, e.g.::

    python bench/graph_overhead.py            # 10,000 steps, 5 repeats
    python bench/graph_overhead.py --quick    # 1,000 steps, 2 repeats (CI smoke)
"""

import argparse
import gc
import math
import os
import statistics
import time

# Thread counts are read when the BLAS/OpenMP runtimes load, so they are set
# here, before numpy, dyn or torch is imported (all three are imported later,
# inside the functions, for that reason).
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

NODES_PER_STEP = 3  # matrix product, add, tanh


def parse_args(argv=None):
    """Parses the benchmark flags, ignoring DyNet's own ``--dynet-*`` flags.

    Args:
        argv: Argument list (default: ``sys.argv[1:]``).

    Returns:
        The parsed ``argparse.Namespace``.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10000, help="chain steps N")
    parser.add_argument("--dim", type=int, default=32, help="vector size")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="1,000 steps, 2 repeats")
    parser.add_argument("--no-torch", action="store_true", help="skip PyTorch")
    args, _ = parser.parse_known_args(argv)
    if args.quick:
        args.nodes, args.repeats = 1000, 2
    return args


def make_dyn_run(steps, W0, b0, h0):
    """Sets up the dyn chain.

    Args:
        steps: Chain length N.
        W0: Initial ``(dim, dim)`` weight matrix (float32 numpy array).
        b0: Initial bias vector.
        h0: Input vector.

    Returns:
        ``(run, grad_W)``: ``run()`` builds, runs and backpropagates one graph and
        returns ``(phase seconds, loss value)``; ``grad_W()`` reads W's gradient.
        None if dyn does not import.
    """
    try:
        import dyn as dy
    except ImportError as err:
        print(f"dyn=unavailable ({err})")
        return None
    model = dy.ParameterCollection()
    W_p = model.add_parameters(W0.shape, init=dy.NumpyInitializer(W0))
    b_p = model.add_parameters(b0.shape, init=dy.NumpyInitializer(b0))

    def run():
        t0 = time.perf_counter()
        dy.renew_cg()
        W, b = W_p, b_p  # Parameters are expressions in DyNet 2.x
        h = dy.inputTensor(h0)
        for _ in range(steps):
            h = dy.tanh(W * h + b)
        loss = dy.sum_elems(h)
        t1 = time.perf_counter()
        value = loss.value()
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        return {"build": t1 - t0, "forward": t2 - t1, "backward": t3 - t2}, value

    return run, W_p.grad_as_array


def make_torch_run(steps, W0, b0, h0):
    """Sets up the PyTorch eager chain; same contract as `make_dyn_run`."""
    try:
        import torch
    except ImportError:
        print("torch=unavailable")
        return None
    torch.set_num_threads(1)
    W = torch.tensor(W0, requires_grad=True)
    b = torch.tensor(b0, requires_grad=True)
    h_in = torch.tensor(h0)

    def run():
        W.grad = b.grad = None
        t0 = time.perf_counter()
        h = h_in
        for _ in range(steps):
            h = torch.tanh(W @ h + b)
        loss = h.sum()
        value = loss.item()  # eager: the value exists already
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        # Eager mode builds while it computes: "forward" is build + forward.
        return {"forward": t1 - t0, "backward": t2 - t1}, value

    return run, lambda: W.grad.numpy()


def timed(run, repeats_out):
    """Runs ``run`` once after a full collection and appends its phase times."""
    gc.collect()  # garbage from the previous run must not be billed to this one
    repeats_out.append(run()[0])


def report(prefix, times, nodes, steps):
    """Prints median per-node and per-step microseconds; returns the medians."""
    medians = {phase: statistics.median(t[phase] for t in times) for phase in times[0]}
    medians["total"] = statistics.median(sum(t.values()) for t in times)
    for phase, seconds in medians.items():
        print(f"{prefix}_{phase}_us_per_node={seconds * 1e6 / nodes:.3f}")
    for phase, seconds in medians.items():
        print(f"{prefix}_{phase}_us_per_step={seconds * 1e6 / steps:.3f}")
    return medians


def main(argv=None):
    """Runs the benchmark and prints ``key=value`` lines.

    Args:
        argv: Argument list (default: ``sys.argv[1:]``).

    Returns:
        Dict of median seconds per phase for ``"dyn"`` and ``"torch"`` (those run).
    """
    import numpy as np

    args = parse_args(argv)
    rng = np.random.RandomState(args.seed)
    steps, nodes = args.nodes, args.nodes * NODES_PER_STEP
    print(f"steps={steps} nodes={nodes} dim={args.dim} repeats={args.repeats}")
    # Small weights keep tanh out of saturation; the bias gives the chain a
    # nonzero fixed point (with b = 0 the values decay through denormals to 0,
    # which would time denormal arithmetic and check nothing).
    dim = args.dim
    W0 = rng.normal(0, 0.5 / math.sqrt(dim), (dim, dim)).astype(np.float32)
    b0 = rng.normal(0, 0.5, dim).astype(np.float32)
    h0 = rng.normal(0, 1.0, dim).astype(np.float32)

    makers = {"dyn": make_dyn_run, "torch": None if args.no_torch else make_torch_run}
    setups = {name: make(steps, W0, b0, h0) for name, make in makers.items() if make}
    runs = {name: setup[0] for name, setup in setups.items() if setup is not None}
    both = len(runs) == 2

    # Warm-up (first-touch allocation, lazy imports, caches), which is also the
    # first backward of each toolkit: W's gradient is not yet accumulated, so
    # the two toolkits can be checked against each other.
    warm = {name: run()[1] for name, run in runs.items()}
    if both:
        grad_dyn, grad_torch = setups["dyn"][1](), setups["torch"][1]()
        loss_diff = abs(warm["dyn"] - warm["torch"]) / max(abs(warm["torch"]), 1e-30)
        grad_diff = np.abs(grad_dyn - grad_torch).max() / max(np.abs(grad_torch).max(), 1e-30)
        print(f"check_loss_rel_diff={loss_diff:.2e}")
        print(f"check_grad_W_rel_diff={grad_diff:.2e}")

    times = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, run in runs.items():  # alternate so both see the same drift
            timed(run, times[name])

    medians = {name: report(name, times[name], nodes, steps) for name in runs}
    if both:
        dyn, torch = medians["dyn"], medians["torch"]
        ratios = {
            "build_forward": (dyn["build"] + dyn["forward"]) / torch["forward"],
            "backward": dyn["backward"] / torch["backward"],
            "total": dyn["total"] / torch["total"],
        }
        for phase, ratio in ratios.items():
            print(f"ratio_{phase}={ratio:.4f}")
        # each repeat ran dyn then PyTorch back to back: the spread of these
        # paired ratios shows how much the machine's noise moves the figure
        paired = sorted(sum(d.values()) / sum(t.values()) for d, t in zip(times["dyn"], times["torch"]))
        print(f"ratio_total_paired_min={paired[0]:.4f}")
        print(f"ratio_total_paired_median={statistics.median(paired):.4f}")
        print(f"ratio_total_paired_max={paired[-1]:.4f}")
    return medians


if __name__ == "__main__":
    main()
