"""BiLSTM tagger in PyTorch (peer of bench/tasks/bilstm_tagger.py): same settings and data.

nn.Embedding(128) -> bidirectional nn.LSTM(50) -> tanh MLP 32 -> tags, one sentence per step;
Adam lr 0.001, no clipping; --sparse: sparse embedding gradients with SparseAdam.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from torch_common import Adam, common, device_of, settings, torch  # noqa: E402

nn = torch.nn
F = torch.nn.functional


class Tagger(nn.Module):
    def __init__(self, nwords, ntags, wembed, hidden, mlp, sparse):
        super().__init__()
        self.emb = nn.Embedding(nwords, wembed, sparse=sparse)
        self.lstm = nn.LSTM(wembed, hidden, bidirectional=True)
        self.H = nn.Linear(2 * hidden, mlp)
        self.O = nn.Linear(mlp, ntags)

    def forward(self, words):
        x = self.emb(words).unsqueeze(1)  # (T, 1, E)
        h, _ = self.lstm(x)
        return self.O(torch.tanh(self.H(h.squeeze(1))))


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0], settings.Tagger)
    args = common.parse(p, argv)
    train, dev, vw, vt, _, _ = common.tagging(args)
    device = device_of(args)
    model = Tagger(len(vw), len(vt), args.wembed, args.hidden, args.mlp, args.sparse).to(device)
    opt = Adam(model, args.sparse)

    def to_tensors(sents):
        return [(torch.tensor(ws, device=device), torch.tensor(ts, device=device))
                for ws, ts in common.tagged_ids(sents, vw, vt)]

    train_ids = to_tensors(train)
    dev_ids = to_tensors(dev)
    dev_gold = [[t for _, t in s] for s in dev]

    def step(item):
        ws, ts = item
        opt.zero_grad()
        loss = F.cross_entropy(model(ws), ts, reduction="sum")
        loss.backward()
        opt.step()
        return loss.item(), len(ts)

    def evaluate():
        good = total = 0
        with torch.no_grad():
            for (ws, _), gold in zip(dev_ids, dev_gold):
                pred = model(ws).argmax(1).tolist()
                good += sum(vt.i2w[p] == g for p, g in zip(pred, gold))
                total += len(gold)
        return {"dev_acc": good / max(total, 1)}

    return common.train_loop(args, train_ids, step, evaluate, "words")


if __name__ == "__main__":
    main()
