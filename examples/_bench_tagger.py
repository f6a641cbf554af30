"""The BiLSTM tagger of bench/ with its data, command line and figures, shared by
examples/parallel_tagger.py (worker processes) and examples/mpi_tagger.py (MPI ranks).

The model has the sizes of bench/tasks/bilstm_tagger.py: embeddings 128, an
LSTM of 50 each way, a tanh layer of 32, trained with exact sparse Adam. The
data is wikiner-10k (``word|tag`` per token) under DATA/tagging/, DATA being the
folder given (``--data DIR``, or as the first argument, as bench/ takes it), else
the ``DYN_DATA`` environment variable, else ../shared/data beside the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench", "tasks"))  # the benchmark's data readers

import common  # noqa: E402
import numpy as np  # noqa: E402

import dyn as dy  # noqa: E402
from dyn.data import find_data_or_exit  # noqa: E402


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
    folder = find_data_or_exit(data_dir, need="tagging")  # a message, not a traceback, without the data
    args = argparse.Namespace(data=str(folder), quick=False)
    train, dev, vw, vt, _, _ = common.tagging(args)
    unk = vw.w2i["_UNK_"]

    def ids(sent):
        return [vw.w2i.get(w, unk) for w, _ in sent], [
            vt.w2i.get(t, -1) for _, t in sent
        ]  # -1: a dev tag never seen in train

    return [ids(s) for s in train[:limit]], [ids(s) for s in dev[:dev_limit]], len(vw), len(vt)


def add_arguments(p, who, bench):
    """The command line both examples share; ``who`` is "rank" or "worker", ``bench`` the script
    that times the example."""
    p.add_argument("data", nargs="?", default=None, help="data folder (as --data)")
    p.add_argument(
        "--data",
        dest="data_option",
        default=None,
        help="data folder (default: $DYN_DATA, else ../shared/data beside the repository)",
    )
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=16, help="sentences per %s per step" % who)
    p.add_argument("--limit", type=int, default=None, help="use the first N training sentences")
    p.add_argument("--dev-limit", type=int, default=None, help="evaluate on the first N dev sentences")
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--save", default=None, help="save the model here (atomically, every epoch)")
    p.add_argument(
        "--json",
        default=None,
        help="write the run's figures here; dev is then evaluated (and the model saved) once, "
        "after training, so the words/s count training only (%s)" % bench,
    )


def build(args):
    """Seed, data, model, trainer and the functions dyn.parallel.train takes, from the command line."""
    dy.reset_random_seed(args.seed)  # the same initial values in every process
    args.data = args.data_option or args.data
    train, dev, nwords, ntags = load_data(args.data, args.limit, args.dev_limit)
    model = dy.ParameterCollection()
    tagger = Tagger(model, nwords, ntags)
    trainer = dy.AdamTrainer(model, args.lr)
    trainer.set_sparse_updates(True)  # exact sparse Adam: a step touches (and exchanges) few rows

    def loss_fn(batch):
        return dy.esum([tagger.loss(w, t) for w, t in batch]), sum(len(t) for _, t in batch)

    def evaluate():
        return {"dev_acc": tagger.accuracy(dev)}

    def cost(example):  # the work of an example: its length (sync splits batches by it)
        return len(example[0])

    return SimpleNamespace(
        train=train,
        dev=dev,
        nwords=nwords,
        ntags=ntags,
        model=model,
        tagger=tagger,
        trainer=trainer,
        loss_fn=loss_fn,
        evaluate=evaluate,
        cost=cost,
    )


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
