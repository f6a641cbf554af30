"""Where a BiLSTM tagger step goes: graph building (lookups apart), forward, backward, update.

The model and settings of bench/tasks/bilstm_tagger.py (settings.Tagger: embedding 128, LSTM 50
each way, tanh MLP 32, Adam lr 0.001, no clipping), one graph per sentence, timed by phase over the first
--sentences training sentences (the first 300 not counted). Microseconds per sentence.

    python bench/tagger_phases.py [DATA] [--sparse] [--sentences 3000]
"""

import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "tasks"))

import common  # noqa: E402
import numpy as np  # noqa: E402
from settings import Tagger  # noqa: E402

import dyn as dy  # noqa: E402


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--sentences", type=int, default=3000)
    args = common.parse(p, argv)
    train, _, vw, vt, _, _ = common.tagging(args)
    model = dy.Model()
    trainer = common.dyn_trainer(dy, model, args.sparse)
    E = model.add_lookup_parameters((len(vw), Tagger.wembed))
    pH, pO = (
        model.add_parameters((Tagger.mlp, 2 * Tagger.hidden)),
        model.add_parameters((len(vt), Tagger.mlp)),
    )
    fwd = dy.VanillaLSTMBuilder(1, Tagger.wembed, Tagger.hidden, model)
    bwd = dy.VanillaLSTMBuilder(1, Tagger.wembed, Tagger.hidden, model)
    data = common.tagged_ids(train[: args.sentences], vw, vt)
    skip = min(300, len(data) // 2)
    acc, words = np.zeros(5), 0
    for i, (ws, ts) in enumerate(data):
        t0 = time.perf_counter()
        dy.renew_cg()
        hid, out = dy.parameter(pH), dy.parameter(pO)
        t1 = time.perf_counter()
        we = [E[w] for w in ws]
        t2 = time.perf_counter()
        fw = fwd.initial_state().transduce(we)
        bw = bwd.initial_state().transduce(reversed(we))
        exps = [out * dy.tanh(hid * dy.concatenate([f, b])) for f, b in zip(fw, reversed(bw))]
        loss = dy.esum([dy.pickneglogsoftmax(e, t) for e, t in zip(exps, ts)])
        t3 = time.perf_counter()
        loss.scalar_value()
        t4 = time.perf_counter()
        loss.backward()
        t5 = time.perf_counter()
        trainer.update()
        t6 = time.perf_counter()
        if i >= skip:
            acc += [t2 - t1, (t1 - t0) + (t3 - t2), t4 - t3, t5 - t4, t6 - t5]
            words += len(ws)
    n = max(len(data) - skip, 1)
    us = acc / n * 1e6
    mode = "sparse" if args.sparse else "dense"
    print("updates=%s sentences=%d words_per_sentence=%.1f" % (mode, n, words / n))
    names = ("lookups_us", "other_building_us", "forward_us", "backward_us", "update_us")
    print(" ".join("%s=%.0f" % kv for kv in zip(names, us)))
    print("total_us=%.0f words_per_sec=%.0f" % (us.sum(), words / acc.sum()))


if __name__ == "__main__":
    main()
