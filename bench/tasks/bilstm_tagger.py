"""BiLSTM tagger (dynet-benchmark dynet-py/bilstm-tagger.py) written with dyn.

Paper settings (Table 1, in settings.Tagger): word embedding 128, LSTM 50 each way, tanh MLP 32;
Adam lr 0.001, no clipping; words seen at most 5 times in train are _UNK_. One graph per sentence.

    python bench/tasks/bilstm_tagger.py [DATA] [--time S] [--sparse] [--quick]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  (sets the startup clock before dyn is imported)
import numpy as np  # noqa: E402
import settings  # noqa: E402

dy = common.toolkit()  # dyn, or DyNet with --toolkit dynet


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0], settings.Tagger)
    args = common.parse(p, argv)
    train, dev, vw, vt, _, _ = common.tagging(args)
    UNK = vw.w2i["_UNK_"]
    nwords, ntags = len(vw), len(vt)

    model = dy.Model()
    trainer = common.dyn_trainer(dy, model, args.sparse)

    WORDS_LOOKUP = model.add_lookup_parameters((nwords, args.wembed))
    pH = model.add_parameters((args.mlp, args.hidden * 2))
    pO = model.add_parameters((ntags, args.mlp))
    fwdRNN = dy.VanillaLSTMBuilder(1, args.wembed, args.hidden, model)
    bwdRNN = dy.VanillaLSTMBuilder(1, args.wembed, args.hidden, model)

    def build_tagging_graph(words):
        dy.renew_cg()
        H = dy.parameter(pH)
        O_ = dy.parameter(pO)
        wembs = [WORDS_LOOKUP[w] for w in words]
        fw_exps = fwdRNN.initial_state().transduce(wembs)
        bw_exps = bwdRNN.initial_state().transduce(reversed(wembs))
        bi_exps = [dy.concatenate([f, b]) for f, b in zip(fw_exps, reversed(bw_exps))]
        return [O_ * dy.tanh(H * x) for x in bi_exps]

    train_ids = common.tagged_ids(train, vw, vt)

    phases = common.Phases(args)

    def step(item):
        ws, ts = item

        def build():
            exps = build_tagging_graph(ws)
            return dy.esum([dy.pickneglogsoftmax(e, t) for e, t in zip(exps, ts)]), len(ts)
        return phases.step(build, trainer)

    def evaluate():
        good = total = 0
        for sent in dev:
            ws = [vw.w2i.get(w, UNK) for w, _ in sent]
            exps = build_tagging_graph(ws)
            for e, (_, t) in zip(exps, sent):
                good += vt.i2w[int(np.argmax(e.npvalue()))] == t
                total += 1
        return {"dev_acc": good / max(total, 1)}

    return common.train_loop(args, train_ids, step, evaluate, "words", phases=phases)


if __name__ == "__main__":
    main()
