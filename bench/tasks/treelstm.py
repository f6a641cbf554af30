"""Tree-LSTM sentiment classifier (dynet-benchmark dynet-py/treenn.py) written with dyn.

Paper settings (Table 1, in settings.TreeLSTM): word embedding 128, hidden 128; binary Tree-LSTM
over the Stanford Sentiment Treebank trees, leaves read their word embedding, internal nodes only
their two children, a softmax over the 5 classes at the root; Adam lr 0.001, no clipping; one
graph per tree. The cell is dy.NaryTreeLSTMBuilder(2, ...) (per-child forget gates, no cell
terms, as the benchmark's own Python cell).

    python bench/tasks/treelstm.py [DATA] [--time S] [--sparse] [--quick] [--batch 64 --dynet-autobatch 1]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  (sets the startup clock before dyn is imported)
import numpy as np  # noqa: E402
import settings  # noqa: E402

dy = common.toolkit()  # dyn, or DyNet with --toolkit dynet


class _Node:
    """A tree node's state: h (output()) and c."""

    def __init__(self, h, c):
        self.h, self.c = h, c

    def output(self):
        return self.h


class PythonTreeLSTM:
    """The benchmark's own Tree-LSTM cell written with plain operations (dynet-benchmark's treenn.py:
    a leaf's i, o, u from W x + b; an internal node's i, o, u and per-child forget gates from
    U [h_l; h_r] + b, +1 on the forget gates): the equations of dy.NaryTreeLSTMBuilder(2, ...),
    for DyNet, which has no such builder, and for dyn with --cell python. begin() after each
    renew_cg."""

    def __init__(self, model, wdim, hdim):
        self.hdim = hdim
        self.pW, self.pbW = model.add_parameters((3 * hdim, wdim)), model.add_parameters(3 * hdim)
        self.pU, self.pbU = model.add_parameters((5 * hdim, 2 * hdim)), model.add_parameters(5 * hdim)

    def begin(self):
        self.W, self.bW = dy.parameter(self.pW), dy.parameter(self.pbW)
        self.U, self.bU = dy.parameter(self.pU), dy.parameter(self.pbU)

    def _gate(self, a, k, f):
        return f(dy.pickrange(a, k * self.hdim, (k + 1) * self.hdim))

    def add_input(self, x):
        a = dy.affine_transform([self.bW, self.W, x])
        c = dy.cmult(self._gate(a, 0, dy.logistic), self._gate(a, 2, dy.tanh))
        return _Node(dy.cmult(self._gate(a, 1, dy.logistic), dy.tanh(c)), c)

    def compose(self, kids):
        left = kids[0]
        if len(kids) > 1:
            right = kids[1]
        else:                       # a missing child: zeros, as the builder
            zero = dy.zeros(self.hdim)
            right = _Node(zero, zero)
        a = dy.affine_transform([self.bU, self.U, dy.concatenate([left.h, right.h])])
        c = (dy.cmult(self._gate(a, 0, dy.logistic), self._gate(a, 2, dy.tanh))
             + dy.cmult(self._gate(a, 3, lambda x: dy.logistic(x + 1.0)), left.c)
             + dy.cmult(self._gate(a, 4, lambda x: dy.logistic(x + 1.0)), right.c))
        return _Node(dy.cmult(self._gate(a, 1, dy.logistic), dy.tanh(c)), c)


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0], settings.TreeLSTM)
    p.add_argument("--cell", choices=("builder", "python"), default=None,
                   help="dy.NaryTreeLSTMBuilder (dyn's default) or the cell in Python operations (DyNet's)")
    p.add_argument("--batch", type=int, default=1, help="trees per graph (their losses summed; with "
                   "--dynet-autobatch 1 the engine batches them)")
    args = common.parse(p, argv)
    train, dev, vw = common.sst(args)
    UNK = vw.w2i["_UNK_"]
    nlabels = settings.TreeLSTM.labels

    model = dy.Model()
    trainer = common.dyn_trainer(dy, model, args.sparse)

    E = model.add_lookup_parameters((len(vw), args.wembed))
    cell = args.cell or ("builder" if hasattr(dy, "NaryTreeLSTMBuilder") else "python")
    if cell == "builder":
        builder = dy.NaryTreeLSTMBuilder(2, 1, args.wembed, args.hidden, model)
    else:
        builder = PythonTreeLSTM(model, args.wembed, args.hidden)
    pW = model.add_parameters((nlabels, args.hidden))
    pb = model.add_parameters(nlabels)

    def encode(tree):
        if tree.is_leaf():
            return builder.add_input(E[vw.w2i.get(tree.word, UNK)])
        return builder.compose([encode(c) for c in tree.children])

    out = {}                            # this graph's softmax parameters

    def scores(tree):
        return dy.affine_transform([out["b"], out["W"], encode(tree).output()])

    def renew():
        dy.renew_cg()
        out["W"], out["b"] = dy.parameter(pW), dy.parameter(pb)
        if cell == "python":
            builder.begin()

    def root_scores(tree):
        renew()
        return scores(tree)

    phases = common.Phases(args)

    def step(trees):
        def build():
            renew()
            return dy.esum([dy.pickneglogsoftmax(scores(t), t.label) for t in trees]), len(trees)
        return phases.step(build, trainer)

    def evaluate():
        good = sum(int(np.argmax(root_scores(t).npvalue())) == t.label for t in dev)
        return {"dev_acc": good / max(len(dev), 1)}

    sys.setrecursionlimit(10000)
    batches = [train[i:i + args.batch] for i in range(0, len(train), args.batch)]
    return common.train_loop(args, None, step, evaluate, "sents", batches=batches, phases=phases)


if __name__ == "__main__":
    main()
