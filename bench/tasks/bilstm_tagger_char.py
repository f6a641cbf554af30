"""BiLSTM tagger with character features for rare words (dynet-benchmark
dynet-py/bilstm-tagger-withchar.py) written with dyn.

Paper settings (Table 1): character embedding 20, word embedding 128, LSTM 50 each way, tanh MLP
32; Adam lr 0.001, no clipping. Words seen more than 5 times in train use their embedding; the
others (and all unseen words) are the concatenated last states of a character BiLSTM (hidden 64
each way, so the representation is also 128) over ``<*> chars <*>``. One graph per sentence.

    python bench/tasks/bilstm_tagger_char.py [DATA] [--time S] [--sparse] [--quick]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  (sets the startup clock before dyn is imported)
import numpy as np  # noqa: E402

import dyn as dy  # noqa: E402


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--cembed", type=int, default=20)
    p.add_argument("--wembed", type=int, default=128)
    p.add_argument("--hidden", type=int, default=50)
    p.add_argument("--mlp", type=int, default=32)
    args = common.parse(p, argv)
    train, dev, vw, vt, vc, wc = common.tagging(args)
    PAD = vc.w2i["<*>"]
    nwords, ntags, nchars = len(vw), len(vt), len(vc)

    model = dy.Model()
    trainer = dy.AdamTrainer(model, 0.001)
    trainer.set_clip_threshold(-1.0)
    trainer.set_sparse_updates(args.sparse)

    WORDS_LOOKUP = model.add_lookup_parameters((nwords, args.wembed))
    CHARS_LOOKUP = model.add_lookup_parameters((nchars, args.cembed))
    pH = model.add_parameters((args.mlp, args.hidden * 2))
    pO = model.add_parameters((ntags, args.mlp))
    fwdRNN = dy.VanillaLSTMBuilder(1, args.wembed, args.hidden, model)
    bwdRNN = dy.VanillaLSTMBuilder(1, args.wembed, args.hidden, model)
    cFwdRNN = dy.VanillaLSTMBuilder(1, args.cembed, args.wembed // 2, model)
    cBwdRNN = dy.VanillaLSTMBuilder(1, args.cembed, args.wembed // 2, model)

    def word_key(w):
        """A frequent word's id, or the tuple of a rare word's character ids."""
        if wc[w] > 5:
            return vw.w2i[w]
        return tuple([PAD] + [vc.w2i.get(c, PAD) for c in w] + [PAD])

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

    train_ids = [([word_key(w) for w, _ in s], [vt.w2i[t] for _, t in s]) for s in train]

    def step(item):
        keys, ts = item
        exps = build_tagging_graph(keys)
        loss = dy.esum([dy.pickneglogsoftmax(e, t) for e, t in zip(exps, ts)])
        value = loss.scalar_value()
        loss.backward()
        trainer.update()
        return value, len(ts)

    def evaluate():
        good = total = 0
        for sent in dev:
            exps = build_tagging_graph([word_key(w) for w, _ in sent])
            for e, (_, t) in zip(exps, sent):
                good += vt.i2w[int(np.argmax(e.npvalue()))] == t
                total += 1
        return {"dev_acc": good / max(total, 1)}

    return common.train_loop(args, train_ids, step, evaluate, "words")


if __name__ == "__main__":
    main()
