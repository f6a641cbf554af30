"""Where the GPU's sparse updates part from the CPU's: the BiLSTM tagger of bench/tasks/
(bilstm_tagger.py's model and data, sparse Adam, no clipping) trained on the same sentences on the
CPU and on GPU:0 in one process, compared two ways.

* ``--check step``: after every sentence, the loss and every parameter are read back and compared
  (each read synchronises the GPU); prints the first sentence and parameter that differ.
* ``--check end``: nothing is read until the end (the GPU runs ahead of the host, as in training);
  then the losses and parameters are compared.

A difference only in ``end`` points at a race between the host and the device; in both, at the
arithmetic. Also with clipping on (``--clip 5``: a gradient norm read back every update).

    python bench/gpu_sparse_diag.py [DATA] [--sentences 30] [--check step|end|both] [--clip -1]
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "tasks"))
sys.path.insert(0, os.path.dirname(HERE))

import common  # noqa: E402
import numpy as np  # noqa: E402
import settings  # noqa: E402

import dyn as dy  # noqa: E402


def build(args, nwords, ntags, device):
    dy.init(devices=device, random_seed=1)
    model = dy.ParameterCollection()
    trainer = dy.AdamTrainer(model, settings.ADAM_LR)
    trainer.set_clip_threshold(args.clip)
    trainer.set_sparse_updates(not args.dense)
    E = model.add_lookup_parameters((nwords, args.wembed))
    pH = model.add_parameters((args.mlp, args.hidden * 2))
    pO = model.add_parameters((ntags, args.mlp))
    f = dy.VanillaLSTMBuilder(1, args.wembed, args.hidden, model)
    b = dy.VanillaLSTMBuilder(1, args.wembed, args.hidden, model)
    return model, trainer, (E, pH, pO, f, b)


def loss_of(parts, ws, ts):
    E, pH, pO, f, b = parts
    dy.renew_cg()
    H, Om = dy.parameter(pH), dy.parameter(pO)
    xs = [E[w] for w in ws]
    fw = f.initial_state().transduce(xs)
    bw = b.initial_state().transduce(list(reversed(xs)))
    outs = [Om * dy.tanh(H * dy.concatenate([x, y])) for x, y in zip(fw, reversed(bw))]
    return dy.esum([dy.pickneglogsoftmax(o, t) for o, t in zip(outs, ts)])


def params(model):
    return {p.name(): p.as_array() for p in model.parameters_list() + model.lookup_parameters_list()}


def run(args, data, nwords, ntags, device, per_step):
    model, trainer, parts = build(args, nwords, ntags, device)
    losses, snaps = [], []
    for ws, ts in data:
        loss = loss_of(parts, ws, ts)
        if per_step:
            losses.append(loss.value())
        else:
            loss.forward()
            losses.append(loss)          # read at the end
        loss.backward()
        trainer.update()
        if per_step:
            snaps.append(params(model))
    if not per_step:
        losses = [None] * len(losses)    # the graphs are gone: compare the parameters only
    return losses, snaps, params(model)


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0], settings.Tagger)
    p.add_argument("--sentences", type=int, default=30)
    p.add_argument("--check", choices=("step", "end", "both"), default="both")
    p.add_argument("--clip", type=float, default=settings.NO_CLIP)
    p.add_argument("--dense", action="store_true")
    p.add_argument("--tol", type=float, default=1e-4)
    args = common.parse(p, argv)
    args.quick = True
    train, _, vw, vt, _, _ = common.tagging(args)
    data = common.tagged_ids(train, vw, vt)[: args.sentences]
    ok = True
    for check in (("step", "end") if args.check == "both" else (args.check,)):
        per_step = check == "step"
        cl, cs, cp = run(args, data, len(vw), len(vt), "CPU", per_step)
        gl, gs, gp = run(args, data, len(vw), len(vt), "GPU:0", per_step)
        first = None
        if per_step:
            for k, (a, b, sa, sb) in enumerate(zip(cl, gl, cs, gs)):
                worst = max((float(np.abs(sa[n] - sb[n]).max()), n) for n in sa)
                if abs(a - b) > args.tol * max(1.0, abs(a)) or worst[0] > args.tol:
                    first = (k, a, b, worst)
                    break
        end = max((float(np.abs(cp[n] - gp[n]).max()), n) for n in cp)
        print("check=%s sparse=%s clip=%g: parameters after %d sentences differ by at most %.3g (%s)"
              % (check, not args.dense, args.clip, len(data), end[0], end[1]))
        if first is not None:
            k, a, b, worst = first
            print("  first difference at sentence %d: loss CPU %.6f GPU %.6f; largest parameter "
                  "difference %.3g in %s" % (k, a, b, worst[0], worst[1]))
        ok = ok and end[0] <= args.tol and first is None
    print("same" if ok else "DIFFERENT")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
