"""BiLSTM tagger with character features for rare words in PyTorch (peer of
bench/tasks/bilstm_tagger_char.py): same settings and data.

Frequent words (count > 5) use nn.Embedding(128); the rare words of a sentence are padded and
packed through one bidirectional character nn.LSTM(20 -> 64 each way) and represented by its final
states; then bidirectional nn.LSTM(50) -> tanh MLP 32 -> tags, one sentence per step. Adam lr
0.001, no clipping; --sparse: sparse embedding gradients with SparseAdam.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from torch_common import Adam, common, torch  # noqa: E402

nn = torch.nn
F = torch.nn.functional
pack = torch.nn.utils.rnn.pack_padded_sequence


class CharTagger(nn.Module):
    def __init__(self, nwords, nchars, ntags, cembed, wembed, hidden, mlp, sparse):
        super().__init__()
        self.wembed = wembed
        self.emb = nn.Embedding(nwords, wembed, sparse=sparse)
        self.cemb = nn.Embedding(nchars, cembed, sparse=sparse)
        self.clstm = nn.LSTM(cembed, wembed // 2, bidirectional=True)
        self.lstm = nn.LSTM(wembed, hidden, bidirectional=True)
        self.H = nn.Linear(2 * hidden, mlp)
        self.O = nn.Linear(mlp, ntags)

    def forward(self, item):
        word_pos, word_ids, rare_pos, chars, lengths, n = item
        x = torch.zeros(n, self.wembed)
        if len(word_pos):
            x = x.index_copy(0, word_pos, self.emb(word_ids))
        if len(rare_pos):
            _, (h, _) = self.clstm(pack(self.cemb(chars), lengths, enforce_sorted=False))
            x = x.index_copy(0, rare_pos, torch.cat([h[0], h[1]], 1))
        h, _ = self.lstm(x.unsqueeze(1))
        return self.O(torch.tanh(self.H(h.squeeze(1))))


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--cembed", type=int, default=20)
    p.add_argument("--wembed", type=int, default=128)
    p.add_argument("--hidden", type=int, default=50)
    p.add_argument("--mlp", type=int, default=32)
    args = common.parse(p, argv)
    train, dev, vw, vt, vc, wc = common.tagging(args)
    PAD = vc.w2i["<*>"]
    model = CharTagger(
        len(vw), len(vc), len(vt), args.cembed, args.wembed, args.hidden, args.mlp, args.sparse
    )
    opt = Adam(model, args.sparse)

    def prepare(sent):
        words = [w for w, _ in sent]
        freq = [i for i, w in enumerate(words) if wc[w] > 5]
        rare = [i for i, w in enumerate(words) if wc[w] <= 5]
        seqs = [[PAD] + [vc.w2i.get(c, PAD) for c in words[i]] + [PAD] for i in rare]
        T = max(map(len, seqs), default=0)
        chars = torch.tensor(
            [[s[t] if t < len(s) else PAD for s in seqs] for t in range(T)], dtype=torch.long
        )
        item = (
            torch.tensor(freq, dtype=torch.long),
            torch.tensor([vw.w2i[words[i]] for i in freq], dtype=torch.long),
            torch.tensor(rare, dtype=torch.long),
            chars,
            torch.tensor([len(s) for s in seqs], dtype=torch.long),
            len(words),
        )
        return item, torch.tensor([vt.w2i.get(t, 0) for _, t in sent])

    train_items = [prepare(s) for s in train]
    dev_items = [(prepare(s)[0], [t for _, t in s]) for s in dev]

    def step(example):
        item, ts = example
        opt.zero_grad()
        loss = F.cross_entropy(model(item), ts, reduction="sum")
        loss.backward()
        opt.step()
        return loss.item(), len(ts)

    def evaluate():
        good = total = 0
        with torch.no_grad():
            for item, gold in dev_items:
                pred = model(item).argmax(1).tolist()
                good += sum(vt.i2w[p] == g for p, g in zip(pred, gold))
                total += len(gold)
        return {"dev_acc": good / max(total, 1)}

    return common.train_loop(args, train_items, step, evaluate, "words")


if __name__ == "__main__":
    main()
