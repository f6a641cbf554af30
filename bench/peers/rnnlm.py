"""Minibatched LSTM language model in PyTorch (peer of bench/tasks/rnnlm.py).

nn.Embedding(128) -> nn.LSTM(256) -> Linear(10k), sentences sorted by length, padded, padding
masked out of the summed loss; minibatch 1/4/16/64 (--minibatch); Adam lr 0.001, no clipping;
--sparse: sparse embedding gradients with SparseAdam (the softmax stays dense). Dev perplexity
in batches of 64 (not timed). Settings (settings.RNNLM) and data (common.lm_data,
common.lm_minibatches) are the dyn program's.

The same model as the dyn program, initialised as DyNet initialises it by default (Glorot
everywhere, LSTM bias zero plus forget bias 1, one LSTM bias vector: torch_common.dynet_init_):
given the same initial weights the two compute the same losses step after step. (PyTorch's own
defaults, N(0, 1) embeddings above all, learn faster per step on this task; a dyn or DyNet user
gets that with ``init="normal"`` on the lookup table.)
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from torch_common import (  # noqa: E402
    Adam,
    common,
    device_of,
    dynet_init_,
    dynet_lstm_init_,
    settings,
    to_device,
    torch,
)

nn = torch.nn
F = torch.nn.functional


class LM(nn.Module):
    def __init__(self, nwords, wembed, hidden, sparse):
        super().__init__()
        self.emb = nn.Embedding(nwords, wembed, sparse=sparse)
        self.lstm = nn.LSTM(wembed, hidden)
        self.out = nn.Linear(hidden, nwords)
        for p in (self.emb.weight, self.out.weight, self.out.bias):
            dynet_init_(p)
        dynet_lstm_init_(self.lstm)

    def loss(self, inp, tgt, mask):
        h, _ = self.lstm(self.emb(inp))  # (T, B, H)
        logits = self.out(h).flatten(0, 1)
        nll = F.cross_entropy(logits, tgt.flatten(), reduction="none")
        return (nll * mask.flatten()).sum()


def tensors(mb, S):
    """A minibatch (longest sentence first) as (input, target, mask, n_words), time-major."""
    T = len(mb[0])
    tgt = [[s[i] if i < len(s) else S for s in mb] for i in range(T)]
    inp = [[S] * len(mb)] + tgt[:-1]
    mask = [[1.0 if i < len(s) else 0.0 for s in mb] for i in range(T)]
    return torch.tensor(inp), torch.tensor(tgt), torch.tensor(mask), sum(map(len, mb))


def to_batches(sents, size, S):
    """common.lm_minibatches (longest first, cut into minibatches), as tensors."""
    return [tensors(mb, S) for mb in common.lm_minibatches(sents, size)]


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0], settings.RNNLM)
    args = common.parse(p, argv)
    train, dev, vw, S = common.lm_data(args)
    device = device_of(args)
    model = LM(len(vw), args.wembed, args.hidden, args.sparse).to(device)
    opt = Adam(model, args.sparse)
    dev_batches = to_device(to_batches(dev, settings.RNNLM.dev_minibatch, S), device)

    def step(mb):
        inp, tgt, mask, n = mb
        opt.zero_grad()
        loss = model.loss(inp, tgt, mask)
        loss.backward()
        opt.step()
        return loss.item(), n

    def evaluate():
        total = words = 0
        with torch.no_grad():
            for inp, tgt, mask, n in dev_batches:
                total += model.loss(inp, tgt, mask).item()
                words += n
        return {"dev_ppl": math.exp(total / max(words, 1))}

    return common.train_loop(
        args, None, step, evaluate, "words", batches=to_device(to_batches(train, args.minibatch, S), device)
    )


if __name__ == "__main__":
    main()
