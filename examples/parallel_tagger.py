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
The data is wikiner-10k under DATA/tagging/ (default ../shared/data); the
model and its sizes are those of examples/mpi_tagger.py (the MPI version) and
bench/tasks/bilstm_tagger.py. bench/parallel.py times this script.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from mpi_tagger import Tagger, load_data, report  # noqa: E402  (the same model and data as the MPI example)

import dyn as dy  # noqa: E402
import dyn.parallel as par  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data", nargs="?", default=None, help="data folder (default ../shared/data)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--mode", choices=("async", "sync"), default="async")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=16, help="sentences per worker per step")
    p.add_argument("--limit", type=int, default=None, help="use the first N training sentences")
    p.add_argument("--dev-limit", type=int, default=None, help="evaluate on the first N dev sentences")
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--save", default=None, help="save the model here (atomically, every epoch)")
    p.add_argument(
        "--json",
        default=None,
        help="write the run's figures here; dev is then evaluated (and the model saved) once, "
        "after training, so the words/s count training only (bench/parallel.py)",
    )
    args = p.parse_args(argv)

    dy.reset_random_seed(args.seed)
    train, dev, nwords, ntags = load_data(args.data, args.limit, args.dev_limit)
    model = dy.ParameterCollection()
    tagger = Tagger(model, nwords, ntags)
    trainer = dy.AdamTrainer(model, args.lr)
    trainer.set_sparse_updates(True)

    def loss_fn(batch):
        return dy.esum([tagger.loss(w, t) for w, t in batch]), sum(len(t) for _, t in batch)

    def evaluate():
        return {"dev_acc": tagger.accuracy(dev)}

    if not args.json:
        print(
            "%d worker(s), %s, %d training sentences, %d per worker per step, %d words, %d tags"
            % (args.workers, args.mode, len(train), args.batch, nwords, ntags),
            flush=True,
        )
    result = par.train(
        loss_fn,
        train,
        trainer,
        workers=args.workers,
        mode=args.mode,
        batch_size=args.batch,
        epochs=args.epochs,
        dev=None if args.json else evaluate,
        save=None if args.json else args.save,
        seed=args.seed,
        cost=lambda ex: len(ex[0]),
        progress=not args.json,
    )
    figures = report({"workers": args.workers, "mode": args.mode}, result, args, model, evaluate)
    return figures


if __name__ == "__main__":
    main()
