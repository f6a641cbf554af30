"""The BiLSTM tagger of bench/ trained data-parallel over MPI.

Every rank builds the same model and vocabulary, ``dyn.parallel.train`` starts
all ranks from rank 0's parameters, and each step every rank computes the
gradient of its ``--batch`` sentences of a global batch of ranks x batch, the
gradients are summed with one all-reduce of the dense gradient pool (the
embedding rows the ranks touched go as (index, row) pairs) and every rank
applies the same Adam step: K ranks train exactly like one process on batches
of K x batch. Rank 0 alone shows progress, evaluates on dev and saves.

    mpirun -n 2 python examples/mpi_tagger.py --epochs 2 --save tagger.safetensors
    python examples/mpi_tagger.py --batch 32        # one process: the same training as above
    srun -n 2 python examples/mpi_tagger.py         # on a Slurm cluster (docs/parallel.md)

Needs mpi4py and an MPI (``pip install 'dyn[mpi]'``). The model and data
are those of examples/_bench_tagger.py (bench/tasks/bilstm_tagger.py's
tagger on wikiner-10k).
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
    bt.add_arguments(p, "rank", "bench/parallel_mpi.py")
    args = p.parse_args(argv)

    ex = par.MpiExchange()
    run = bt.build(args)  # the broadcast from rank 0 makes sure every rank starts from its values
    if ex.rank == 0:
        print(
            "%d rank(s), %d training sentences, global batch %d x %d, %d words, %d tags"
            % (ex.size, len(run.train), ex.size, args.batch, run.nwords, run.ntags),
            flush=True,
        )
    result = par.train(
        run.loss_fn,
        run.train,
        run.trainer,
        batch_size=args.batch,
        epochs=args.epochs,
        dev=None if args.json else run.evaluate,
        save=None if args.json else args.save,
        seed=args.seed,
        cost=run.cost,
        progress=ex.rank == 0 and not args.json,
        exchange=ex,
    )
    figures = bt.report({"ranks": ex.size}, result, args, run.model, run.evaluate) if ex.rank == 0 else None
    ex.close()
    return figures


if __name__ == "__main__":
    main()
