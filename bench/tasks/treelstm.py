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

import dyn as dy  # noqa: E402


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0], settings.TreeLSTM)
    p.add_argument("--batch", type=int, default=1, help="trees per graph (their losses summed; with "
                   "--dynet-autobatch 1 the engine batches them)")
    args = common.parse(p, argv)
    train, dev, vw = common.sst(args)
    UNK = vw.w2i["_UNK_"]
    nlabels = settings.TreeLSTM.labels

    model = dy.Model()
    trainer = common.dyn_trainer(dy, model, args.sparse)

    E = model.add_lookup_parameters((len(vw), args.wembed))
    builder = dy.NaryTreeLSTMBuilder(2, 1, args.wembed, args.hidden, model)
    pW = model.add_parameters((nlabels, args.hidden))
    pb = model.add_parameters(nlabels)

    def encode(tree):
        if tree.is_leaf():
            return builder.add_input(E[vw.w2i.get(tree.word, UNK)])
        return builder.compose([encode(c) for c in tree.children])

    def scores(tree):
        return dy.affine_transform([dy.parameter(pb), dy.parameter(pW), encode(tree).output()])

    def root_scores(tree):
        dy.renew_cg()
        return scores(tree)

    def step(trees):
        dy.renew_cg()
        loss = dy.esum([dy.pickneglogsoftmax(scores(t), t.label) for t in trees])
        value = loss.scalar_value()
        loss.backward()
        trainer.update()
        return value, len(trees)

    def evaluate():
        good = sum(int(np.argmax(root_scores(t).npvalue())) == t.label for t in dev)
        return {"dev_acc": good / max(len(dev), 1)}

    sys.setrecursionlimit(10000)
    batches = [train[i:i + args.batch] for i in range(0, len(train), args.batch)]
    return common.train_loop(args, None, step, evaluate, "sents", batches=batches)


if __name__ == "__main__":
    main()
