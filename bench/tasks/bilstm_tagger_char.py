"""BiLSTM tagger with character features for rare words (dynet-benchmark
dynet-py/bilstm-tagger-withchar.py) written with dyn.

Paper settings (Table 1, in settings.CharTagger): character embedding 20, word embedding 128, LSTM
50 each way, tanh MLP 32; Adam lr 0.001, no clipping. Words seen more than 5 times in train use
their embedding; the others (and all unseen words) are the concatenated last states of a
character BiLSTM (hidden 64 each way, so the representation is also 128) over ``<*> chars <*>``
(common.word_keys). One graph per sentence.

    python bench/tasks/bilstm_tagger_char.py [DATA] [--time S] [--sparse] [--quick]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  (sets the startup clock before dyn is imported)
import numpy as np  # noqa: E402
import settings  # noqa: E402

dy = common.toolkit()  # dyn, or DyNet with --toolkit dynet


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0], settings.CharTagger)
    args = common.parse(p, argv)
    train, dev, vw, vt, vc, wc = common.tagging(args)
    nwords, ntags, nchars = len(vw), len(vt), len(vc)

    model = dy.Model()
    trainer = common.dyn_trainer(dy, model, args.sparse)

    WORDS_LOOKUP = model.add_lookup_parameters((nwords, args.wembed))
    CHARS_LOOKUP = model.add_lookup_parameters((nchars, args.cembed))
    pH = model.add_parameters((args.mlp, args.hidden * 2))
    pO = model.add_parameters((ntags, args.mlp))
    fwdRNN = dy.VanillaLSTMBuilder(1, args.wembed, args.hidden, model)
    bwdRNN = dy.VanillaLSTMBuilder(1, args.wembed, args.hidden, model)
    cFwdRNN = dy.VanillaLSTMBuilder(1, args.cembed, args.wembed // 2, model)
    cBwdRNN = dy.VanillaLSTMBuilder(1, args.cembed, args.wembed // 2, model)

    def word_rep(key, cf_init, cb_init):
        if isinstance(key, int):
            return WORDS_LOOKUP[key]
        char_embs = [CHARS_LOOKUP[c] for c in key]
        fw_exps = cf_init.transduce(char_embs)
        bw_exps = cb_init.transduce(reversed(char_embs))
        return dy.concatenate([fw_exps[-1], bw_exps[-1]])

    def build_tagging_graph(keys):
        dy.renew_cg()
        H = dy.parameter(pH)
        O_ = dy.parameter(pO)
        cf_init = cFwdRNN.initial_state()
        cb_init = cBwdRNN.initial_state()
        wembs = [word_rep(k, cf_init, cb_init) for k in keys]
        fw_exps = fwdRNN.initial_state().transduce(wembs)
        bw_exps = bwdRNN.initial_state().transduce(reversed(wembs))
        bi_exps = [dy.concatenate([f, b]) for f, b in zip(fw_exps, reversed(bw_exps))]
        return [O_ * dy.tanh(H * x) for x in bi_exps]

    train_ids = common.char_tagged(train, vw, vt, vc, wc)

    phases = common.Phases(args)

    def step(item):
        keys, ts = item

        def build():
            exps = build_tagging_graph(keys)
            return dy.esum([dy.pickneglogsoftmax(e, t) for e, t in zip(exps, ts)]), len(ts)
        return phases.step(build, trainer)

    def evaluate():
        good = total = 0
        for sent in dev:
            exps = build_tagging_graph(common.word_keys([w for w, _ in sent], vw, vc, wc))
            for e, (_, t) in zip(exps, sent):
                good += vt.i2w[int(np.argmax(e.npvalue()))] == t
                total += 1
        return {"dev_acc": good / max(total, 1)}

    return common.train_loop(args, train_ids, step, evaluate, "words", phases=phases)


if __name__ == "__main__":
    main()
