"""Minibatched LSTM language model (dynet-benchmark dynet-py/rnnlm-batch.py) written with dyn.

Paper settings (Table 1): word embedding 128, one LSTM layer of 256, minibatches of 1, 4, 16 or 64
sentences (--minibatch), sentences sorted by length and padded with masks, a softmax over the
10k PTB vocabulary (``<s>`` ends every sentence); Adam lr 0.001, no clipping. Dev perplexity is
computed in batches of 64 whatever the training minibatch (forward only, not timed).

    python bench/tasks/rnnlm.py [DATA] [--minibatch N] [--time S] [--sparse] [--quick]
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  (sets the startup clock before dyn is imported)

import dyn as dy  # noqa: E402


def batches(sents, size):
    """Sort longest first and cut into minibatches (as the benchmark's train_order)."""
    sents = sorted(sents, key=lambda s: -len(s))
    return [sents[i : i + size] for i in range(0, len(sents), size)]


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--minibatch", type=int, default=16)
    p.add_argument("--wembed", type=int, default=128)
    p.add_argument("--hidden", type=int, default=256)
    args = common.parse(p, argv)
    train, dev, vw = common.ptb(args)
    S = vw.w2i["<s>"]
    train = [s + [S] for s in train]
    dev = [s + [S] for s in dev]
    nwords = len(vw)

    model = dy.Model()
    trainer = dy.AdamTrainer(model, 0.001)
    trainer.set_clip_threshold(-1.0)
    trainer.set_sparse_updates(args.sparse)

    WORDS_LOOKUP = model.add_lookup_parameters((nwords, args.wembed))
    W_sm = model.add_parameters((nwords, args.hidden))
    b_sm = model.add_parameters(nwords)
    RNN = dy.VanillaLSTMBuilder(1, args.wembed, args.hidden, model)

    def calc_lm_loss(sents):
        dy.renew_cg()
        W_exp = dy.parameter(W_sm)
        b_exp = dy.parameter(b_sm)
        B = len(sents)
        s = RNN.initial_state().add_input(dy.lookup_batch(WORDS_LOOKUP, [S] * B))
        losses = []
        for i in range(len(sents[0])):
            wids = [sent[i] if len(sent) > i else S for sent in sents]
            mask = [1.0 if len(sent) > i else 0.0 for sent in sents]
            score = dy.affine_transform([b_exp, W_exp, s.output()])
            loss = dy.pickneglogsoftmax_batch(score, wids)
            if mask[-1] != 1:
                loss = loss * dy.reshape(dy.inputVector(mask), (1,), B)
            losses.append(loss)
            if i + 1 < len(sents[0]):
                s = s.add_input(dy.lookup_batch(WORDS_LOOKUP, wids))
        return dy.sum_batches(dy.esum(losses)), sum(len(sent) for sent in sents)

    def step(mb):
        loss, n = calc_lm_loss(mb)
        value = loss.scalar_value()
        loss.backward()
        trainer.update()
        return value, n

    dev_batches = batches(dev, 64)

    def evaluate():
        total = words = 0
        for mb in dev_batches:
            loss, n = calc_lm_loss(mb)
            total += loss.scalar_value()
            words += n
        return {"dev_ppl": math.exp(total / max(words, 1))}

    return common.train_loop(args, train, step, evaluate, "words", batches=batches(train, args.minibatch))


if __name__ == "__main__":
    main()
