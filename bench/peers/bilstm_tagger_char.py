"""BiLSTM tagger with character features for rare words in PyTorch (peer of
bench/tasks/bilstm_tagger_char.py): same settings and data.

Frequent words (count > 5) use nn.Embedding(128); the rare words of a sentence are padded and
packed through one bidirectional character nn.LSTM(20 -> 64 each way) and represented by its final
states; then bidirectional nn.LSTM(50) -> tanh MLP 32 -> tags, one sentence per step. Adam lr
0.001, no clipping; --sparse: sparse embedding gradients with SparseAdam. Settings
(settings.CharTagger) and the split into frequent and spelled words (common.char_tagged) are the
dyn program's.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from torch_common import Adam, common, device_of, settings, torch  # noqa: E402

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
        x = torch.zeros(n, self.wembed, device=self.O.weight.device)
        if len(word_pos):
            x = x.index_copy(0, word_pos, self.emb(word_ids))
        if len(rare_pos):
            _, (h, _) = self.clstm(pack(self.cemb(chars), lengths, enforce_sorted=False))
            x = x.index_copy(0, rare_pos, torch.cat([h[0], h[1]], 1))
        h, _ = self.lstm(x.unsqueeze(1))
        return self.O(torch.tanh(self.H(h.squeeze(1))))


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0], settings.CharTagger)
    args = common.parse(p, argv)
    train, dev, vw, vt, vc, wc = common.tagging(args)
    PAD = vc.w2i["<*>"]
    device = device_of(args)
    model = CharTagger(
        len(vw), len(vc), len(vt), args.cembed, args.wembed, args.hidden, args.mlp, args.sparse
    ).to(device)
    opt = Adam(model, args.sparse)

    def prepare(keys, tags):
        """common.char_tagged's (word keys, tag ids) as tensors: the frequent words' positions and
        ids, the spelled words' positions and characters (time-major, padded), their lengths."""
        freq = [i for i, k in enumerate(keys) if isinstance(k, int)]
        rare = [i for i, k in enumerate(keys) if not isinstance(k, int)]
        seqs = [keys[i] for i in rare]
        T = max(map(len, seqs), default=0)
        chars = torch.tensor(
            [[s[t] if t < len(s) else PAD for s in seqs] for t in range(T)], dtype=torch.long
        )
        item = (
            torch.tensor(freq, dtype=torch.long, device=device),
            torch.tensor([keys[i] for i in freq], dtype=torch.long, device=device),
            torch.tensor(rare, dtype=torch.long, device=device),
            chars.to(device),
            torch.tensor([len(s) for s in seqs], dtype=torch.long),     # (pack wants them on the host)
            len(keys),
        )
        return item, torch.tensor(tags, device=device)

    train_items = [prepare(*kt) for kt in common.char_tagged(train, vw, vt, vc, wc)]
    dev_items = [
        (prepare(*kt)[0], [t for _, t in s]) for kt, s in zip(common.char_tagged(dev, vw, vt, vc, wc), dev)
    ]

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
