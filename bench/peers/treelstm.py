"""Binary Tree-LSTM sentiment classifier in PyTorch (peer of bench/tasks/treelstm.py).

Same model: leaves read their word embedding (i, o, u from W x + b), internal nodes their two
children (i, o, u, f_left, f_right from U [h_l; h_r] + b, +1 on the forget gates as dyn's
forget_bias), softmax over 5 classes at the root; embedding 128, hidden 128; Adam lr 0.001, no
clipping; one tree per step, recursion in Python (nn.LSTM does not apply to trees). Settings
(settings.TreeLSTM) and data (common.sst, common.leaf_ids) are the dyn program's.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from torch_common import Adam, common, device_of, settings, torch  # noqa: E402

nn = torch.nn
F = torch.nn.functional


class TreeLSTM(nn.Module):
    def __init__(self, nwords, wembed, hidden, nlabels, sparse):
        super().__init__()
        self.hidden = hidden
        self.emb = nn.Embedding(nwords, wembed, sparse=sparse)
        self.W = nn.Linear(wembed, 3 * hidden)  # leaf: i, o, u
        self.U = nn.Linear(2 * hidden, 5 * hidden)  # parent: i, o, u, f_l, f_r
        self.out = nn.Linear(hidden, nlabels)

    def encode(self, tree, ids):
        if tree.is_leaf():
            a = self.W(self.emb(ids[tree]))
            i, o, u = a.chunk(3)
            c = torch.sigmoid(i) * torch.tanh(u)
            return torch.sigmoid(o) * torch.tanh(c), c
        states = [self.encode(ch, ids) for ch in tree.children]
        if len(states) == 1:  # 3 SST training trees have a unary inner node: the absent child is zero,
            states.append((torch.zeros_like(states[0][0]), torch.zeros_like(states[0][1])))  # as in dyn
        (hl, cl), (hr, cr) = states
        a = self.U(torch.cat([hl, hr]))
        i, o, u, fl, fr = a.chunk(5)
        c = torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(fl + 1) * cl + torch.sigmoid(fr + 1) * cr
        return torch.sigmoid(o) * torch.tanh(c), c

    def forward(self, tree, ids):
        return self.out(self.encode(tree, ids)[0])


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0], settings.TreeLSTM)
    p.add_argument("--batch", type=int, default=1, help="trees per optimiser step (losses summed)")
    args = common.parse(p, argv)
    train, dev, vw = common.sst(args)
    device = device_of(args)
    model = TreeLSTM(len(vw), args.wembed, args.hidden, settings.TreeLSTM.labels, args.sparse).to(device)
    opt = Adam(model, args.sparse)

    def leaf_ids(tree):
        return {n: torch.tensor(i, device=device) for n, i in common.leaf_ids(tree, vw).items()}

    train_items = [(t, leaf_ids(t), torch.tensor(t.label, device=device)) for t in train]
    dev_items = [(t, leaf_ids(t)) for t in dev]

    def step(items):
        opt.zero_grad()
        loss = sum(F.cross_entropy(model(tree, ids).unsqueeze(0), label.unsqueeze(0))
                   for tree, ids, label in items)
        loss.backward()
        opt.step()
        return loss.item(), len(items)

    def evaluate():
        with torch.no_grad():
            good = sum(int(model(t, ids).argmax()) == t.label for t, ids in dev_items)
        return {"dev_acc": good / max(len(dev_items), 1)}

    sys.setrecursionlimit(10000)
    batches = [train_items[i:i + args.batch] for i in range(0, len(train_items), args.batch)]
    return common.train_loop(args, None, step, evaluate, "sents", batches=batches)


if __name__ == "__main__":
    main()
