"""A softmax layer's weight gradient held back for the Adam step (see "Low-rank gradients" in
dyn/_core/core/graph.pyx) against computed in backward and read back by the step.

One step of a softmax over V words (W: V x H, Adam, no clipping) from n hidden states, the RNN
language model's last layer over one sentence at minibatch 1: build, forward, backward, update,
with the product held back (``blas._set_lowrank(1)``) and not (``0``), in blocks of steps that
alternate, the first steps of each block not timed. Between steps a buffer of --flush MB is
streamed, as the rest of a training step would (0: none). Prints the median time of backward +
update per step each way and their ratio (above 1: holding back is faster), per n.

    python bench/lowrank_adam.py [--vocab 10000] [--hidden 256] [--cols 8,22,48] [--blocks 15]
    python bench/lowrank_adam.py --ahead 0,1,2     # also: how far ahead the step fetches its rows
    python bench/lowrank_adam.py --vocab 640 --cols 2,8,16,24,32 --flush 4 --always
        # shapes the rules leave alone: every product held back, parameters of any size tracked

Products are held back on processors with AVX-512, by the rules of blas.pyx's _lr_shape (measured
with this script): on AMD's the product computed apart is dyn_sgemm_nt_tall's, on Intel's
OpenBLAS's. Without AVX-512 nothing is held back and both ways are the same.
"""

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import dyn as dy  # noqa: E402
from dyn._core.cpu import blas  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vocab", type=int, default=10000)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--cols", default="8,22,48", help="hidden states per step (a sentence's words)")
    p.add_argument("--blocks", type=int, default=15, help="blocks of steps each way")
    p.add_argument("--block", type=int, default=8, help="steps a block (the first two not timed)")
    p.add_argument("--flush", type=int, default=64, help="MB streamed between steps (0: none)")
    p.add_argument("--always", action="store_true", help="hold back every product of two columns "
                   "and more, whatever the rules say, and track parameters of any size (to measure "
                   "shapes the rules leave alone)")
    p.add_argument("--ahead", default="", help="64-row panels ahead the held-back step fetches the "
                   "weights and moments, each in turn (default: the kernel's)")
    a = p.parse_args()
    rng = np.random.RandomState(0)
    pc = dy.ParameterCollection()
    W = pc.add_parameters((a.vocab, a.hidden), init=rng.uniform(-0.05, 0.05, (a.vocab, a.hidden)))
    b = pc.add_parameters(a.vocab, init=np.zeros(a.vocab))
    trainer = dy.AdamTrainer(pc, 0.001)
    trainer.set_clip_threshold(0)
    junk = np.ones(a.flush * (1 << 18), np.float32)
    held_mode = 2 if a.always else 1
    old = blas._set_lowrank(held_mode)
    from dyn._core.train import update

    old_min = update._set_lowrank_min(1) if a.always else None
    print("V=%d H=%d, %d blocks of %d steps each way; backward + update per step, medians (ms)"
          % (a.vocab, a.hidden, a.blocks, a.block))
    print("%6s %6s %10s %10s %8s %10s" % ("ahead", "cols", "held", "computed", "ratio", "held (n)"))
    default = blas._set_lowrank_ahead(1)
    blas._set_lowrank_ahead(default)
    for ahead in [int(x) for x in a.ahead.split(",")] if a.ahead else [default]:
        blas._set_lowrank_ahead(ahead)
        for n in [int(c) for c in a.cols.split(",")]:
            _row(a, rng, W, b, trainer, junk, ahead, n, held_mode)
    blas._set_lowrank_ahead(default)
    blas._set_lowrank(old)
    if old_min is not None:
        update._set_lowrank_min(old_min)


def _row(a, rng, W, b, trainer, junk, ahead, n, held_mode):
    """One line of the table: n columns, the held-back step fetching `ahead` panels ahead."""
    h = rng.uniform(-1, 1, (a.hidden, n)).astype(np.float32)
    ys = list(rng.randint(0, a.vocab, n))
    times = {1: [], 0: []}
    c0 = blas._lowrank_counts()
    for k in range(a.blocks):
        for mode in ((1, 0) if k % 2 == 0 else (0, 1)):
            blas._set_lowrank(held_mode if mode else 0)
            for j in range(a.block):
                dy.renew_cg()
                x = dy.tanh(dy.inputTensor(h, batched=True))   # (held back: values in the arena)
                loss = dy.sum_batches(dy.pickneglogsoftmax_batch(
                    dy.affine_transform([dy.parameter(b), dy.parameter(W), x]), ys))
                loss.value()
                if a.flush:
                    junk += 1.0
                t = time.perf_counter()
                loss.backward()
                trainer.update()
                if j >= 2:
                    times[mode].append(time.perf_counter() - t)
    held = blas._lowrank_counts()[1] - c0[1]
    m1, m0 = np.median(times[1]) * 1e3, np.median(times[0]) * 1e3
    print("%6d %6d %10.3f %10.3f %8.3f %10d" % (ahead, n, m1, m0, m0 / m1, held))


if __name__ == "__main__":
    main()
