"""One of dyn's speed switches on and off in training, paired item by item.

Runs a bench/tasks program's model and step function (its own arguments after the task's name)
on random training items, each item twice, one after the other with the switch on and off (the
order alternating item by item, the first --warm items not counted); both runs update the model.
Prints the two speeds and their ratio (above 1: on is faster). Pairing each item with itself
cancels most of a shared machine's drift, which moves separate runs by 5-20%.

    python bench/paired.py dot bilstm_tagger --sparse [--items 3000] [--warm 200]
    python bench/paired.py deferred-catchup treelstm --sparse --items 2000

The switches (each one's default is on):
  dot               A^T B as blocks of dot products on Intel processors (blas._set_dot)
  few               A B of a few columns in dyn's loop on Intel processors (blas._set_few)
  mid               A B of 33-63 columns with a mid-sized A in dyn's loop on Intel processors (blas._set_mid)
  big               A B and A B^T with every side large in dyn's blocked loop (blas._set_big)
  big-tn            A^T B of 32 columns and more in the blocked loop on Intel processors (blas._set_big_tn)
  gemv-t            A^T x up to 3 2^16 elements in dyn's register loops (else 2^16)
  adam-still        Adam's shortcut for stretches with zero gradient and moment (optim._set_adam_still)
  deferred-catchup  lookups defer the exact catch-up of their rows to the next forward pass
  fast-transduce    VanillaLSTMBuilder.transduce makes the fused nodes directly
  autobatch         automatic batching (as the tasks' --ab-compare)
  bias-sum          the softmax's backward sums its affine_transform's bias gradient (softmax._set_bias_sum)
  fresh-small       score gradients from 1 MB written fresh, not zeroed first (off: from 16 MB only)
  null              nothing at all: the two runs are the same program, so the ratio shows how far
                    the pairing itself strays from 1 on this machine (an A/A test)
"""

import os
import random
import runpy
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "tasks"))

import common  # noqa: E402

TASKS = ("bilstm_tagger", "bilstm_tagger_char", "treelstm", "rnnlm", "tagger_handbatched")


def _switch(name):
    """A function of one bool that turns the named switch on or off."""
    from dyn._core.cpu import blas, optim
    from dyn._core.train import catchup

    if name == "dot":
        return blas._set_dot
    if name == "few":
        return blas._set_few
    if name == "big":
        return blas._set_big
    if name == "big-tn":
        return blas._set_big_tn
    if name == "mid":
        return blas._set_mid
    if name == "gemv-t":
        return lambda on: blas._set_gemv_t_regs(0 if on else 1 << 16)
    if name == "adam-still":
        return optim._set_adam_still
    if name == "deferred-catchup":
        return catchup._set_deferred
    if name == "fast-transduce":
        from dyn.builders._rnn_base import RNNBuilderBase
        from dyn.builders.lstm import VanillaLSTMBuilder

        fast = VanillaLSTMBuilder._advance

        def set_fast(on):
            VanillaLSTMBuilder._advance = fast if on else RNNBuilderBase._advance
        return set_fast
    if name == "bias-sum":
        from dyn._core.cpu import softmax

        return softmax._set_bias_sum
    if name == "fresh-small":
        from dyn._core.core import graph

        default = graph._set_fresh_min(4194304)   # the default, read (and put back below)
        graph._set_fresh_min(default)
        return lambda on: graph._set_fresh_min(default if on else 4194304)
    if name == "null":
        return lambda on: None
    if name == "autobatch":
        from dyn._config import state

        def set_ab(on):
            state["autobatch"] = bool(on)
        return set_ab
    raise SystemExit("unknown switch %r (see python bench/paired.py --help)" % name)


def _pop_int(argv, flag, default):
    if flag in argv:
        i = argv.index(flag)
        value = int(argv[i + 1])
        del argv[i:i + 2]
        return value
    return default


def main():
    argv = sys.argv[1:]
    if len(argv) < 2 or argv[0] in ("-h", "--help") or argv[1] not in TASKS:
        raise SystemExit(__doc__)
    n = _pop_int(argv, "--items", 3000)
    warm = _pop_int(argv, "--warm", 200)
    name, task, rest = argv[0], argv[1], argv[2:]
    switch = _switch(name)
    caught = {}

    def capture(args, train, step, evaluate, unit, batches=None, phases=None):
        caught["items"] = list(batches if batches is not None else train)
        caught["step"] = step
        return {}

    common.train_loop = capture
    sys.argv = [os.path.join(HERE, "tasks", task + ".py")] + rest
    runpy.run_path(sys.argv[0], run_name="__main__")
    items, step = caught["items"], caught["step"]
    rng = random.Random(1)
    seconds = {True: 0.0, False: 0.0}
    units = {True: 0, False: 0}
    try:
        for k in range(warm + n):
            item = rng.choice(items)
            for on in ((True, False) if k % 2 == 0 else (False, True)):
                switch(on)
                t0 = time.perf_counter()
                _, done = step(item)
                dt = time.perf_counter() - t0
                if k >= warm:
                    seconds[on] += dt
                    units[on] += done
    finally:
        switch(True)
    on, off = units[True] / seconds[True], units[False] / seconds[False]
    print("switch=%s task=%s %s items=%d" % (name, task, " ".join(rest), n))
    print("on=%.1f off=%.1f units/s on/off=%.4f" % (on, off, on / off))


if __name__ == "__main__":
    main()
