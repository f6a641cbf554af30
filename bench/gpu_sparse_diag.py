"""Where the GPU's sparse updates part from the CPU's: the BiLSTM tagger of bench/tasks/
(bilstm_tagger.py's model and data, sparse updates, no clipping) trained on the same sentences on
the CPU and on GPU:0 in one process, for several rules, compared in two ways.

* ``watch`` (every config): each sentence's rows of the lookup table and their optimizer state are
  read raw (a host copy of the pool and of the state arrays, which changes nothing: no catch-up
  is triggered) before the graph is built, after it is built (the lookups caught the rows up),
  and after the update; with the loss and the dense parameters. The first difference is named
  by phase: the catch-up of idle rows, the forward pass, the sparse step, or the dense step. Its
  inputs (both devices' rows and state before and after) are saved with --dump for a replay.
* ``end``: nothing is read until the end (the GPU runs ahead of the host as in training); only
  the final parameters are compared. A difference here and none in ``watch`` points at a race
  between the host and the device rather than at the arithmetic.

    python bench/gpu_sparse_diag.py [DATA] [--sentences 30] [--configs adam:exact,...] [--dump F.npz]
"""
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "tasks"))
sys.path.insert(0, os.path.dirname(HERE))

import common  # noqa: E402
import numpy as np  # noqa: E402
import settings  # noqa: E402

import dyn as dy  # noqa: E402

TRAINERS = {"adam": lambda m: dy.AdamTrainer(m, settings.ADAM_LR),
            "momentum": lambda m: dy.MomentumSGDTrainer(m, 0.01),
            "sgd": lambda m: dy.SimpleSGDTrainer(m, 0.01),
            "rmsprop": lambda m: dy.RMSPropTrainer(m, 0.001)}


def build(args, rule, exact, nwords, ntags, device):
    dy.init(devices=device, random_seed=1)
    model = dy.ParameterCollection()
    trainer = TRAINERS[rule](model)
    trainer.set_clip_threshold(args.clip)
    trainer.set_sparse_updates(True, exact=exact)
    E = model.add_lookup_parameters((nwords, args.wembed))
    pH = model.add_parameters((args.mlp, args.hidden * 2))
    pO = model.add_parameters((ntags, args.mlp))
    f = dy.VanillaLSTMBuilder(1, args.wembed, args.hidden, model)
    b = dy.VanillaLSTMBuilder(1, args.wembed, args.hidden, model)
    return model, trainer, (E, pH, pO, f, b)


def graph(parts, ws, ts):
    E, pH, pO, f, b = parts
    dy.renew_cg()
    H, Om = dy.parameter(pH), dy.parameter(pO)
    xs = [E[w] for w in ws]
    return xs, H, Om


def loss_of(parts, built, ts):
    E, pH, pO, f, b = parts
    xs, H, Om = built
    fw = f.initial_state().transduce(xs)
    bw = b.initial_state().transduce(list(reversed(xs)))
    outs = [Om * dy.tanh(H * dy.concatenate([x, y])) for x, y in zip(fw, reversed(bw))]
    return dy.esum([dy.pickneglogsoftmax(o, t) for o, t in zip(outs, ts)])


def raw(trainer, E, rows):
    """The rows' values and optimizer state as stored (no catch-up), and their last-step marks."""
    rs = E.rowsize
    W = np.array(E.pool.host_range(False, E.off, E.off + E.size)).reshape(E.nrows, rs)[rows]
    s = trainer._states.get(id(E))
    if s is None:
        return {"W": W, "last": np.zeros(len(rows), np.int64), "tloc": 0}
    out = {"W": W, "last": np.array(s.last)[rows], "tloc": s.tloc, "base": s.base}
    for i in range(len(s.arrays)):
        out["s%d" % i] = s.host_array(i).reshape(E.nrows, rs)[rows]
    return out


def dense(model):
    return {p.name(): p.as_array() for p in model.parameters_list()}


def run_watch(args, rule, exact, data, nwords, ntags, device):
    model, trainer, parts = build(args, rule, exact, nwords, ntags, device)
    E = parts[0]
    recs = []
    for ws, ts in data:
        rows = np.array(sorted(set(ws)), np.int64)
        rec = {"rows": rows, "before": raw(trainer, E, rows)}
        built = graph(parts, ws, ts)
        rec["caught"] = raw(trainer, E, rows)
        loss = loss_of(parts, built, ts)
        rec["loss"] = loss.value()
        loss.backward()
        trainer.update()
        rec["after"] = raw(trainer, E, rows)
        rec["dense"] = dense(model)
        recs.append(rec)
    return recs, E.as_array()


def run_end(args, rule, exact, data, nwords, ntags, device, sync):
    model, trainer, parts = build(args, rule, exact, nwords, ntags, device)
    for ws, ts in data:
        loss = loss_of(parts, graph(parts, ws, ts), ts)
        loss.forward()
        loss.backward()
        trainer.update()
        if sync and device != "CPU":
            import dyn._core.gpu as gpu
            gpu.current().synchronize()
    out = dense(model)
    out["E"] = parts[0].as_array()
    return out


def worst(a, b):
    """Largest absolute difference over the keys both dicts hold as arrays, and its key."""
    best = (0.0, None)
    for k in a:
        if isinstance(a[k], np.ndarray) and k in b and a[k].shape == b[k].shape and a[k].size:
            d = float(np.max(np.abs(a[k].astype(np.float64) - b[k].astype(np.float64))))
            if not d <= best[0]:
                best = (d, k)
    return best


def compare_watch(cpu, gpu, tol, dump, label):
    for k, (c, g) in enumerate(zip(cpu, gpu)):
        for phase in ("before", "caught"):
            d, key = worst(c[phase], g[phase])
            if not d <= tol:
                return report(k, phase, d, key, c, g, dump, label)
        if not abs(c["loss"] - g["loss"]) <= tol * max(1.0, abs(c["loss"])):
            return report(k, "forward", abs(c["loss"] - g["loss"]), "loss", c, g, dump, label)
        d, key = worst(c["after"], g["after"])
        if not d <= tol:
            return report(k, "sparse step", d, key, c, g, dump, label)
        d, key = worst(c["dense"], g["dense"])
        if not d <= tol:
            return report(k, "dense step", d, key, c, g, dump, label)
    return None


def report(k, phase, d, key, c, g, dump, label):
    msg = "  first difference at sentence %d, phase %s: %.3g in %s (loss CPU %.6f GPU %.6f)" % (
        k, phase, d, key, c["loss"], g["loss"])
    if phase in ("before", "caught", "sparse step"):
        ph = "after" if phase == "sparse step" else phase
        diff = np.abs(c[ph][key].astype(np.float64) - g[ph][key].astype(np.float64)).max(axis=1)
        bad = np.nonzero(diff > 1e-4)[0][:5]
        for i in bad:
            msg += "\n    row %d: last CPU %s GPU %s (before the graph), tloc %s; diff %.3g" % (
                c["rows"][i], c["before"]["last"][i], g["before"]["last"][i], c["before"].get("tloc"),
                diff[i])
            for part in ("before", "caught", "after"):
                for nm in ("W", "s0", "s1"):
                    if nm in c[part]:
                        msg += "\n      %-6s %s CPU %s\n             GPU %s" % (
                            part, nm, np.array2string(c[part][nm][i][:4], precision=9),
                            np.array2string(g[part][nm][i][:4], precision=9))
    if dump:
        flat = {}
        for dev, r in (("cpu", c), ("gpu", g)):
            flat[dev + "_rows"] = r["rows"]
            for part in ("before", "caught", "after"):
                for nm, a in r[part].items():
                    flat["%s_%s_%s" % (dev, part, nm)] = np.asarray(a)
        np.savez(dump.replace(".npz", "_%s.npz" % label.replace(":", "_")), **flat)
    print(msg)
    return k


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0], settings.Tagger)
    p.add_argument("--sentences", type=int, default=30)
    p.add_argument("--configs", default="adam:exact,adam:approx,momentum:exact,rmsprop:exact,sgd:exact")
    p.add_argument("--end", default="adam:exact,adam:exact:sync",
                   help="configs run in 'end' mode (':sync': the device synchronised after each update)")
    p.add_argument("--clip", type=float, default=settings.NO_CLIP)
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--dump", default="")
    args = common.parse(p, argv)
    args.quick = True
    train, _, vw, vt, _, _ = common.tagging(args)
    data = common.tagged_ids(train, vw, vt)
    random.shuffle(data)                 # the items the task trains on first (train_loop's order)
    data = data[: args.sentences]
    ok = True
    for cfg in [c for c in args.configs.split(",") if c]:
        rule, kind = cfg.split(":")
        exact = kind == "exact"
        cw, cE = run_watch(args, rule, exact, data, len(vw), len(vt), "CPU")
        gw, gE = run_watch(args, rule, exact, data, len(vw), len(vt), "GPU:0")
        d = float(np.abs(cE - gE).max())
        print("watch %-16s clip=%g: table after %d sentences differs by %.3g; last loss CPU %.6f GPU %.6f"
              % (cfg, args.clip, len(data), d, cw[-1]["loss"], gw[-1]["loss"]), flush=True)
        first = compare_watch(cw, gw, args.tol, args.dump, cfg)
        ok = ok and first is None and d <= args.tol
    for cfg in [c for c in args.end.split(",") if c]:
        rule, kind = cfg.split(":")[:2]
        sync = cfg.endswith(":sync")
        c = run_end(args, rule, kind == "exact", data, len(vw), len(vt), "CPU", sync)
        g = run_end(args, rule, kind == "exact", data, len(vw), len(vt), "GPU:0", sync)
        d, key = worst(c, g)
        print("end   %-16s clip=%g: parameters after %d sentences differ by at most %.3g (%s)"
              % (cfg, args.clip, len(data), d, key), flush=True)
        ok = ok and d <= args.tol
    dy.init(devices="CPU")
    print("same" if ok else "DIFFERENT")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
