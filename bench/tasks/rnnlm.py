"""Minibatched LSTM language model (dynet-benchmark dynet-py/rnnlm-batch.py) written with dyn.

Paper settings (Table 1, in settings.RNNLM): word embedding 128, one LSTM layer of 256,
minibatches of 1, 4, 16 or 64 sentences (--minibatch), sentences sorted by length and padded with
masks (common.lm_minibatches), a softmax over the 10k PTB vocabulary (``<s>`` ends every
sentence); Adam lr 0.001, no clipping; DyNet's default initialisation. The softmax layer runs
once per minibatch: the LSTM outputs of all steps are joined into one batch
(``concatenate_to_batch``) for one matrix product and one ``pickneglogsoftmax_batch``, as the
PyTorch peer runs one ``nn.Linear`` over the whole sequence. Dev perplexity is computed in
batches of 64 (settings.RNNLM.dev_minibatch) whatever the training minibatch (forward only, not
timed).

    python bench/tasks/rnnlm.py [DATA] [--minibatch N] [--time S] [--sparse] [--step] [--quick]
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  (sets the startup clock before dyn is imported)
import settings  # noqa: E402

dy = common.toolkit()  # dyn, or DyNet with --toolkit dynet


class RNNLM:
    """The model: embedding -> one VanillaLSTMBuilder layer -> softmax over the vocabulary."""

    def __init__(self, model, nwords, wembed, hidden, S):
        self.S = S
        self.WORDS_LOOKUP = model.add_lookup_parameters((nwords, wembed))
        self.W_sm = model.add_parameters((nwords, hidden))
        self.b_sm = model.add_parameters(nwords)
        self.RNN = dy.VanillaLSTMBuilder(1, wembed, hidden, model)

    def loss(self, sents):
        """Summed loss of a minibatch: the LSTM runs over all its steps, then one affine transform
        and one pickneglogsoftmax_batch score every (step, sentence) pair at once, time-major."""
        dy.renew_cg()
        W_exp = dy.parameter(self.W_sm)
        b_exp = dy.parameter(self.b_sm)
        S, B, T = self.S, len(sents), len(sents[0])
        wids = [sent[i] if len(sent) > i else S for i in range(T) for sent in sents]
        inputs = [dy.lookup_batch(self.WORDS_LOOKUP, [S] * B)]
        inputs += [dy.lookup_batch(self.WORDS_LOOKUP, wids[i * B : (i + 1) * B]) for i in range(T - 1)]
        hs = dy.concatenate_to_batch(self.RNN.initial_state().transduce(inputs))  # {hidden} x T*B
        losses = dy.pickneglogsoftmax_batch(dy.affine_transform([b_exp, W_exp, hs]), wids)
        if len(sents[-1]) < T:  # padded steps of shorter sentences count zero
            mask = [1.0 if len(sent) > i else 0.0 for i in range(T) for sent in sents]
            losses = losses * dy.reshape(dy.inputVector(mask), (1,), T * B)
        return dy.sum_batches(losses), sum(len(sent) for sent in sents)

    def loss_steps(self, sents):
        """The same loss written step by step, as DyNet's own rnnlm examples are: one add_input
        and one softmax (affine transform + pickneglogsoftmax_batch) per time step, summed with
        esum. Unbatched, the softmax is a matrix-vector product per step; the automatic batching
        engine joins the steps' softmax products into one."""
        dy.renew_cg()
        W_exp = dy.parameter(self.W_sm)
        b_exp = dy.parameter(self.b_sm)
        S, B, T = self.S, len(sents), len(sents[0])
        state = self.RNN.initial_state()
        prev = [S] * B
        losses = []
        for i in range(T):
            wids = [sent[i] if len(sent) > i else S for sent in sents]
            state = state.add_input(dy.lookup_batch(self.WORDS_LOOKUP, prev))
            loss = dy.pickneglogsoftmax_batch(dy.affine_transform([b_exp, W_exp, state.output()]), wids)
            if len(sents[-1]) <= i:  # padded steps of shorter sentences count zero
                mask = [1.0 if len(sent) > i else 0.0 for sent in sents]
                loss = loss * dy.reshape(dy.inputVector(mask), (1,), B)
            losses.append(loss)
            prev = wids
        return dy.sum_batches(dy.esum(losses)), sum(len(sent) for sent in sents)


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0], settings.RNNLM)
    p.add_argument("--step", action="store_true",
                   help="write the model step by step (add_input and a softmax per time step), as "
                   "DyNet's rnnlm examples do, instead of transduce and one softmax per minibatch")
    args = common.parse(p, argv)
    train, dev, vw, S = common.lm_data(args)

    model = dy.Model()
    trainer = common.dyn_trainer(dy, model, args.sparse)
    lm = RNNLM(model, len(vw), args.wembed, args.hidden, S)

    phases = common.Phases(args)

    loss = lm.loss_steps if args.step else lm.loss

    def step(mb):
        return phases.step(lambda: loss(mb), trainer)

    dev_batches = common.lm_minibatches(dev, settings.RNNLM.dev_minibatch)

    def evaluate():
        total = words = 0
        for mb in dev_batches:
            value, n = lm.loss(mb)
            total += value.scalar_value()
            words += n
        return {"dev_ppl": math.exp(total / max(words, 1))}

    batches = common.lm_minibatches(train, args.minibatch)
    return common.train_loop(args, train, step, evaluate, "words", batches=batches, phases=phases)


if __name__ == "__main__":
    main()
