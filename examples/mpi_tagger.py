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

Needs mpi4py and an MPI (``pip install 'dyn[mpi]'``). The data is
wikiner-10k (``word|tag`` per token) under DATA/tagging/ (default
../shared/data, as bench/tasks/bilstm_tagger.py); the model has that task's
sizes: embeddings 128, an LSTM of 50 each way, a tanh layer of 32.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench", "tasks"))  # the benchmark's data readers

import common  # noqa: E402
import numpy as np  # noqa: E402

import dyn as dy  # noqa: E402
import dyn.parallel as par  # noqa: E402


class Tagger:
    """Embeddings -> forward and backward LSTMs -> tanh layer -> tag scores, per word."""

    def __init__(self, model, nwords, ntags, wembed=128, hidden=50, mlp=32):
        self.lookup = model.add_lookup_parameters((nwords, wembed))
        self.pH = model.add_parameters((mlp, hidden * 2))
        self.pO = model.add_parameters((ntags, mlp))
        self.fwd = dy.VanillaLSTMBuilder(1, wembed, hidden, model)
        self.bwd = dy.VanillaLSTMBuilder(1, wembed, hidden, model)

    def scores(self, words):
        """One Expression of tag scores per word (in the current graph)."""
        H, O_ = dy.parameter(self.pH), dy.parameter(self.pO)
        wembs = [self.lookup[w] for w in words]
        fw = self.fwd.initial_state().transduce(wembs)
        bw = self.bwd.initial_state().transduce(reversed(wembs))
        return [O_ * dy.tanh(H * dy.concatenate([f, b])) for f, b in zip(fw, reversed(bw))]

    def loss(self, words, tags):
        return dy.esum([dy.pickneglogsoftmax(s, t) for s, t in zip(self.scores(words), tags)])

    def accuracy(self, sents):
        good = total = 0
        for words, tags in sents:
            dy.renew_cg()
            predicted = [int(np.argmax(s.npvalue())) for s in self.scores(words)]
            good += sum(p == t for p, t in zip(predicted, tags))
            total += len(tags)
        return good / max(total, 1)


def load_data(data_dir, limit=None, dev_limit=None):
    """(train, dev, nwords, ntags) as (word ids, tag ids) pairs; words seen < 6 times are _UNK_."""
    args = argparse.Namespace(data=data_dir or common.default_data_dir(), quick=False)
    train, dev, vw, vt, _, _ = common.tagging(args)
    unk = vw.w2i["_UNK_"]

    def ids(sent):
        return [vw.w2i.get(w, unk) for w, _ in sent], [
            vt.w2i.get(t, -1) for _, t in sent
        ]  # -1: a dev tag never seen in train

    return [ids(s) for s in train[:limit]], [ids(s) for s in dev[:dev_limit]], len(vw), len(vt)


def report(figures, result, args, model, evaluate):
    """The run's figures (printed; with --json also written there, after dev is evaluated and the
    model saved once training is over, so the timing covers training only)."""
    figures.update(
        {
            "batch": args.batch,
            "sentences": result.examples,
            "words": result.units,
            "steps": result.steps,
            "seconds": result.seconds,
            "words_per_s": result.units_per_s,
            "train_loss": result.loss,
        }
    )
    if args.json:
        if args.save:
            model.save(args.save)
        t0 = time.perf_counter()
        figures["dev_acc"] = evaluate()["dev_acc"]
        figures["dev_seconds"] = time.perf_counter() - t0
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(figures, f)
        os.replace(tmp, args.json)
    else:
        figures["dev_acc"] = result.dev[-1]["dev_acc"] if result.dev else None
    print(" ".join("%s=%s" % (k, "%.4f" % v if isinstance(v, float) else v) for k, v in figures.items()))
    return figures


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data", nargs="?", default=None, help="data folder (default ../shared/data)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=16, help="sentences per rank per step")
    p.add_argument("--limit", type=int, default=None, help="use the first N training sentences")
    p.add_argument("--dev-limit", type=int, default=None, help="evaluate on the first N dev sentences")
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--save", default=None, help="save the model here (rank 0, atomically, every epoch)")
    p.add_argument(
        "--json",
        default=None,
        help="rank 0 writes the run's figures here; dev is then evaluated (and the model saved) "
        "once, after training, so the words/s count training only (bench/parallel_mpi.py)",
    )
    args = p.parse_args(argv)

    ex = par.MpiExchange()
    dy.reset_random_seed(args.seed)  # the same initial values on every rank (the broadcast makes sure)
    train, dev, nwords, ntags = load_data(args.data, args.limit, args.dev_limit)
    model = dy.ParameterCollection()
    tagger = Tagger(model, nwords, ntags)
    trainer = dy.AdamTrainer(model, args.lr)
    trainer.set_sparse_updates(True)  # exact sparse Adam: only the rows a step touched are exchanged

    def loss_fn(batch):
        return dy.esum([tagger.loss(w, t) for w, t in batch]), sum(len(t) for _, t in batch)

    def evaluate():
        return {"dev_acc": tagger.accuracy(dev)}

    if ex.rank == 0:
        print(
            "%d rank(s), %d training sentences, global batch %d x %d, %d words, %d tags"
            % (ex.size, len(train), ex.size, args.batch, nwords, ntags),
            flush=True,
        )
    result = par.train(
        loss_fn,
        train,
        trainer,
        batch_size=args.batch,
        epochs=args.epochs,
        dev=None if args.json else evaluate,
        save=None if args.json else args.save,
        seed=args.seed,
        cost=lambda ex: len(ex[0]),
        progress=ex.rank == 0 and not args.json,
        exchange=ex,
    )
    if ex.rank == 0:
        figures = report({"ranks": ex.size}, result, args, model, evaluate)
    ex.close()
    return figures if ex.rank == 0 else None


if __name__ == "__main__":
    main()
