"""The BiLSTM tagger of bench/ trained with worker processes on one machine.

``dyn.parallel.train(..., workers=N, mode=...)`` forks N-1 workers from this
process (which is worker 0: the progress bar, dev and saving are here):

* ``--mode async`` (Hogwild, as the DyNet paper): the parameters and Adam's
  moments live in shared memory and every worker updates them without locks,
  each on its share of every epoch, ``--batch`` sentences a step.
* ``--mode sync``: each step the N workers compute the gradients of their
  ``--batch`` sentences of a global batch of N x batch, the gradients are
  summed, and every worker applies the same update: exactly one process on
  batches of N x batch (``--workers 1 --batch 32`` trains the same model as
  ``--workers 2 --batch 16 --mode sync``, to float32 rounding).

    python examples/parallel_tagger.py --workers 1
    python examples/parallel_tagger.py --workers 2 --mode async --epochs 2 --save tagger.safetensors
    python examples/parallel_tagger.py --workers 2 --mode sync --batch 16

Ctrl-C stops every worker after its current step (and saves, with --save).
The model and data are those of examples/_bench_tagger.py (bench/tasks/
bilstm_tagger.py's tagger on wikiner-10k), as in examples/mpi_tagger.py (the
MPI version). bench/parallel.py times this script.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _bench_tagger as bt  # noqa: E402

import dyn.parallel as par  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bt.add_arguments(p, "worker", "bench/parallel.py")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--mode", choices=("async", "sync"), default="async")
    args = p.parse_args(argv)

    run = bt.build(args)
    if not args.json:
        print(
            "%d worker(s), %s, %d training sentences, %d per worker per step, %d words, %d tags"
            % (args.workers, args.mode, len(run.train), args.batch, run.nwords, run.ntags),
            flush=True,
        )
    result = par.train(
        run.loss_fn,
        run.train,
        run.trainer,
        workers=args.workers,
        mode=args.mode,
        batch_size=args.batch,
        epochs=args.epochs,
        dev=None if args.json else run.evaluate,
        save=None if args.json else args.save,
        seed=args.seed,
        cost=run.cost,
        progress=not args.json,
    )
    return bt.report({"workers": args.workers, "mode": args.mode}, result, args, run.model, run.evaluate)


if __name__ == "__main__":
    main()
