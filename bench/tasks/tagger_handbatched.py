"""Hand-batched BiLSTM tagger written with dyn: padding, dy.lookup_batch, masks.

The same model as bench/tasks/bilstm_tagger.py (settings.Tagger: word embedding 128, LSTM 50 each
way, tanh MLP 32, Adam lr 0.001, no clipping, words seen at most 5 times are _UNK_), but one graph
runs a whole minibatch as batched expressions, the way a DyNet user batches by hand:

* sentences are padded to the longest one of the minibatch with a padding word (its own row of
  the embedding table, so no real word's row is touched by padding);
* the forward LSTM reads the padded sentences (padding after the words); the backward LSTM reads
  every sentence reversed and then padded, so no real position ever sees a padding word, and
  ``dy.pick_batch`` brings its outputs back to the words' positions;
* the MLP and the log-softmax run once on the {2H, T} x B matrix of all positions, and the loss is
  ``-sum(log_softmax * gold)`` with a {tags, T} x B one-hot gold tensor that is zero at padded
  positions (the mask).

``HandBatchedTagger`` is used by bench/autobatch.py (the hand-batched reference for automatic
batching); run as a program it trains the tagger like the other tasks:

    python bench/tasks/tagger_handbatched.py [DATA] [--time S] [--batch 64] [--sparse] [--quick]
"""

import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  (sets the startup clock before dyn is imported)
import numpy as np  # noqa: E402
import settings  # noqa: E402

import dyn as dy  # noqa: E402


class Batch:
    """A minibatch padded once, when the data are prepared (as a data loader would)."""

    __slots__ = ("size", "lengths", "fwd_ids", "bwd_ids", "realign", "gold", "words")

    def __init__(self, sents, pad, ntags):
        """``sents``: [(word ids, tag ids)]; ``pad``: the padding word's id."""
        self.size = len(sents)
        self.lengths = [len(ws) for ws, _ in sents]
        self.words = sum(self.lengths)
        T = max(self.lengths)
        fwd = [ws + [pad] * (T - len(ws)) for ws, _ in sents]
        bwd = [ws[::-1] + [pad] * (T - len(ws)) for ws, _ in sents]
        # time-major id lists for dy.lookup_batch
        self.fwd_ids = [[s[t] for s in fwd] for t in range(T)]
        self.bwd_ids = [[s[t] for s in bwd] for t in range(T)]
        # the backward output of word t of sentence b is at step n_b - 1 - t of its (reversed) run;
        # padded positions take any valid step (their gold row is zero)
        self.realign = [[n - 1 - t if t < n else t for n in self.lengths] for t in range(T)]
        gold = np.zeros((ntags, T, len(sents)))
        for b, (_, ts) in enumerate(sents):
            gold[ts, np.arange(len(ts)), b] = 1.0
        self.gold = gold


class HandBatchedTagger:
    """The batched graph of the tagger over the parameters it is given."""

    def __init__(self, E, pH, pO, fwdRNN, bwdRNN, pad, ntags):
        self.E, self.pH, self.pO = E, pH, pO
        self.fwdRNN, self.bwdRNN = fwdRNN, bwdRNN
        self.pad, self.ntags = pad, ntags

    def batch(self, sents):
        return Batch(sents, self.pad, self.ntags)

    def scores(self, batch):
        """{tags, T} x B scores of every position (padded ones included)."""
        H = dy.parameter(self.pH)
        O_ = dy.parameter(self.pO)
        fw = self.fwdRNN.initial_state().transduce([dy.lookup_batch(self.E, ids) for ids in batch.fwd_ids])
        bw = self.bwdRNN.initial_state().transduce([dy.lookup_batch(self.E, ids) for ids in batch.bwd_ids])
        BW = dy.concatenate_cols(bw)  # {H, T} x B, in each sentence's reversed order
        bw_aligned = dy.concatenate_cols([dy.pick_batch(BW, idx, 1) for idx in batch.realign])
        X = dy.concatenate([dy.concatenate_cols(fw), bw_aligned])  # {2H, T} x B
        return O_ * dy.tanh(H * X)

    def loss(self, batch):
        """Summed negative log-likelihood of the real words' tags (a scalar, batch 1)."""
        logp = dy.log_softmax(self.scores(batch))  # column-wise
        gold = dy.inputTensor(batch.gold, batched=True)
        return -dy.sum_batches(dy.sum_elems(dy.cmult(logp, gold)))


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0], settings.Tagger)
    p.add_argument("--batch", type=int, default=64)
    args = common.parse(p, argv)
    train, dev, vw, vt, _, _ = common.tagging(args)
    pad = len(vw)  # one more row: the padding word
    ntags = len(vt)

    model = dy.Model()
    trainer = common.dyn_trainer(dy, model, args.sparse)
    E = model.add_lookup_parameters((len(vw) + 1, args.wembed))
    pH = model.add_parameters((args.mlp, args.hidden * 2))
    pO = model.add_parameters((ntags, args.mlp))
    fwdRNN = dy.VanillaLSTMBuilder(1, args.wembed, args.hidden, model)
    bwdRNN = dy.VanillaLSTMBuilder(1, args.wembed, args.hidden, model)
    tagger = HandBatchedTagger(E, pH, pO, fwdRNN, bwdRNN, pad, ntags)

    train_ids = common.tagged_ids(train, vw, vt)
    random.shuffle(train_ids)
    batches = [tagger.batch(train_ids[i : i + args.batch]) for i in range(0, len(train_ids), args.batch)]
    dev_ids = common.tagged_ids(dev, vw, vt)
    dev_gold = [[t for _, t in s] for s in dev]
    dev_batches = [tagger.batch(dev_ids[i : i + args.batch]) for i in range(0, len(dev_ids), args.batch)]

    def step(batch):
        dy.renew_cg()
        loss = tagger.loss(batch)
        value = loss.value()
        loss.backward()
        trainer.update()
        return value, batch.words

    def evaluate():
        good = total = 0
        for k, batch in enumerate(dev_batches):
            dy.renew_cg()
            pred = np.argmax(tagger.scores(batch).npvalue().reshape(ntags, -1, batch.size, order="F"), axis=0)
            for b, n in enumerate(batch.lengths):
                for t in range(n):
                    tag = vt.i2w[pred[t, b]]
                    good += tag == dev_gold[k * args.batch + b][t]
                    total += 1
        return {"dev_acc": good / max(total, 1)}

    return common.train_loop(args, train_ids, step, evaluate, "words", batches=batches)


if __name__ == "__main__":
    main()
