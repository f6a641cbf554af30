"""A BiLSTM tagger trained with the training tricks of dyn.training.

The tagger reads ``word|tag`` sentences: WikiNER, ``DATA/tagging/wikiner-10k``, with
DATA from ``--data``, else the ``DYN_DATA`` environment variable, else
``../shared/data`` beside the repository (see ``dyn.data``). ``--generated`` trains
on a tiny generated tagging set instead, to try the program without the data.
Training uses:

  * the loop helper ``training.fit`` (progress bar with loss and examples/s);
  * the loss normalised per sentence length (``training.per_length``);
  * gradient clipping, with the gradient-norm history the trainer records
    (``--plot FILE`` draws it next to the threshold);
  * learning-rate decay when dev accuracy stops improving;
  * early stopping that restores the best dev parameters;
  * checkpoints of the last epochs, whose average is evaluated too.

    python examples/tagger_tricks.py --train 400 --epochs 6
    python examples/tagger_tricks.py --data /path/to/data
    python examples/tagger_tricks.py --generated
"""

import argparse
import os
import random
import tempfile

import numpy as np

import dyn as dy
from dyn import training
from dyn.data import find_data_or_exit

EPOCH_LINE = "epoch %(epoch)d loss %(loss).4f dev %(dev).4f lr %(learning_rate)g"


def read_tagged(path, limit, max_len=40):
    """``word|tag word|tag`` lines -> [[(word, tag), ...]] (sentences up to max_len tokens)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            items = [tuple(x.rsplit("|", 1)) for x in line.split()]
            if 0 < len(items) <= max_len:
                out.append(items)
            if len(out) >= limit:
                break
    return out


def generated_data(n, seed):
    """A tiny tagging task: capitalised words after "in" are places (LOC), other
    capitalised words people (PER), the rest O."""
    rng = random.Random(seed)
    names = ["Ada", "Bo", "Cy", "Di", "Ed", "Flo", "Gus", "Hal"]
    places = ["Rome", "Oslo", "Lima", "Kyiv", "Doha", "Bern"]
    filler = ["the", "a", "saw", "met", "went", "to", "from", "and", "then", "left"]
    out = []
    for _ in range(n):
        sent = []
        for _ in range(rng.randint(4, 12)):
            r = rng.random()
            if r < 0.2:
                sent.append((rng.choice(names), "I-PER"))
            elif r < 0.35:
                sent += [("in", "O"), (rng.choice(places + names[:2]), "I-LOC")]
            else:
                sent.append((rng.choice(filler), "O"))
        out.append(sent)
    return out


def load_data(data_dir, n_train, n_dev, seed, generated=False):
    """(train, dev, source): WikiNER slices from the data folder, or generated ones when asked.
    Without the data the program stops with a message saying where the data goes."""
    if generated:
        return generated_data(n_train, seed), generated_data(n_dev, seed + 1), "generated"
    d = os.path.join(find_data_or_exit(data_dir, need="tagging"), "tagging", "wikiner-10k")
    train = read_tagged(os.path.join(d, "train.txt"), n_train)
    dev = read_tagged(os.path.join(d, "dev.txt"), n_dev)
    return train, dev, d


class Tagger:
    """Word embeddings -> one BiLSTM layer -> a linear layer per token."""

    def __init__(self, pc, words, tags, embed=32, hidden=32):
        self.w2i = {w: i for i, w in enumerate(words)}
        self.tags = list(tags)
        self.E = pc.add_lookup_parameters((len(words), embed), name="E")
        self.bilstm = dy.BiRNNBuilder(1, embed, hidden, pc, dy.VanillaLSTMBuilder)
        self.W = pc.add_parameters((len(tags), hidden), name="W")
        self.b = pc.add_parameters(len(tags), name="b")

    def scores(self, words):
        unk = self.w2i["<unk>"]
        xs = [self.E[self.w2i.get(w, unk)] for w in words]
        return [self.W * h + self.b for h in self.bilstm.transduce(xs)]

    def loss(self, sent):
        """The sentence's loss, normalised per token."""
        scores = self.scores([w for w, _ in sent])
        tags = [self.tags.index(t) if t in self.tags else 0 for _, t in sent]
        total = dy.esum([dy.pickneglogsoftmax(s, t) for s, t in zip(scores, tags)])
        return training.per_length(total, len(sent))

    def batch_loss(self, batch):
        return dy.esum([self.loss(s) for s in batch])

    def predict(self, words):
        dy.renew_cg()
        return [self.tags[int(np.argmax(s.npvalue()))] for s in self.scores(words)]

    def accuracy(self, data):
        right = total = 0
        for sent in data:
            pred = self.predict([w for w, _ in sent])
            right += sum(p == t for p, (_, t) in zip(pred, sent))
            total += len(sent)
        return right / total


def vocabulary(train, min_count=2):
    counts = {}
    for s in train:
        for w, _ in s:
            counts[w] = counts.get(w, 0) + 1
    words = ["<unk>"] + sorted(w for w, c in counts.items() if c >= min_count)
    tags = sorted({t for s in train for _, t in s})
    return words, tags


def main(argv=None):
    """Trains the tagger with the tricks; returns accuracies and what each trick did."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--data",
        default=None,
        help="data folder (default: $DYN_DATA, else ../shared/data beside the repository)",
    )
    p.add_argument("--generated", action="store_true", help="train on a tiny generated tagging set instead")
    p.add_argument("--train", type=int, default=400)
    p.add_argument("--dev", type=int, default=100)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--plot", default=None, help="save the gradient-norm plot here (needs matplotlib)")
    p.add_argument("--progress", action="store_true", help="show the progress bar")
    args, _ = p.parse_known_args(argv)
    dy.init(random_seed=args.seed)
    train, dev, source = load_data(args.data, args.train, args.dev, args.seed, args.generated)
    words, tags = vocabulary(train)
    pc = dy.ParameterCollection()
    tagger = Tagger(pc, words, tags)
    trainer = dy.AdamTrainer(pc, args.lr)
    trainer.set_clip_threshold(args.clip)
    stopper = training.EarlyStopping(pc, patience=2)
    decay = training.ReduceLROnPlateau(trainer, factor=0.5, patience=0)
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = training.Checkpoints(pc, tmp, keep=3)
        log = training.fit(
            trainer, train, tagger.batch_loss, epochs=args.epochs, batch_size=args.batch, seed=args.seed,
            dev_metric=lambda: tagger.accuracy(dev), early_stopping=stopper, plateau=decay, checkpoints=ckpt,
            progress=args.progress, log=lambda r: print(EPOCH_LINE % r),
        )  # fmt: skip
        best_dev = tagger.accuracy(dev)  # early stopping restored the best epoch's parameters
        averaged = dy.ParameterCollection()
        avg_tagger = Tagger(averaged, words, tags)
        ckpt.average(k=min(3, len(ckpt.paths)), model=averaged)
        avg_dev = avg_tagger.accuracy(dev)
    norms = trainer.grad_norm_history()
    if args.plot:
        training.plot_grad_norms(trainer).savefig(args.plot)
    majority = max(tags, key=lambda t: sum(tt == t for s in dev for _, tt in s))
    chance = sum(t == majority for s in dev for _, t in s) / sum(len(s) for s in dev)
    result = {
        "data": source, "test_acc": best_dev, "train_acc": tagger.accuracy(train[: len(dev)]),
        "averaged_dev_acc": avg_dev, "chance": chance, "epochs_run": len(log),
        "best_epoch": stopper.best_step, "lr_reductions": decay.reductions,
        "clipped_fraction": training.clipped_fraction(norms, args.clip), "updates": trainer.updates,
    }  # fmt: skip
    print(result)
    return result


if __name__ == "__main__":
    main()
