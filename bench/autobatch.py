"""Automatic operation batching: simple per-example code, 64 examples per graph, off and on.

Each task is trained with the code a DyNet user writes, one loss per example
and one graph per minibatch of ``--batch`` (64) examples::

    dy.renew_cg(autobatching=flag)
    losses = [tree_loss(t) for t in batch]
    loss = dy.esum(losses)
    loss.value(); loss.backward(); trainer.update()

* Tree-LSTM sentiment on SST (bench/tasks/treelstm.py's model: embedding 128,
  dy.NaryTreeLSTMBuilder(2, 1, 128, 128), softmax over 5 classes at the root, sparse Adam lr
  0.001, no clipping; all 8,544 training trees): dyn with autobatching off and
  on, and the same model in PyTorch eager (bench/peers/treelstm.py's TreeLSTM, 64 trees per
  optimiser step, the losses summed; starts from dyn's initial weights).
* BiLSTM tagger on WikiNER (bench/tasks/bilstm_tagger.py's model: embedding 128, LSTM 50 each
  way, tanh MLP 32, sparse Adam lr 0.001): per-sentence code with autobatching off and on, and
  the same model batched by hand (bench/tasks/tagger_handbatched.py: padding to the longest
  sentence of the minibatch, dy.lookup_batch, masks), on the same minibatches and parameters.

Measurement: ``--rounds`` rounds, each starting from a random minibatch of the task's (fixed,
shuffled) list. In a round dyn's configurations alternate minibatch by minibatch (the order
rotated every minibatch) through the same minibatches until they have had ``--time / --rounds``
seconds each on average; PyTorch then (or, every other round, before them) trains alone for that
time from the same start. Speeds are medians over the rounds; a ratio is the median over the
rounds of the two configurations' speed ratio on the minibatches both ran in that round (identical
work), printed with the range of these per-round ratios (the machine is noisy). The tagger runs
twice: on random minibatches (``tagger``) and on minibatches of sentences of similar length
(``tagger-sorted``: little padding, the hand-batched version at its best). Single-threaded
(OMP/OpenBLAS/MKL threads set to 1 before numpy is imported, torch threads 1). Before timing, the
first minibatch's loss and gradients are computed with autobatching off and on (and hand-batched,
and with PyTorch for the loss) and their relative differences printed; the script stops if they
disagree beyond float32 rounding (``--allow-mismatch`` goes on and marks the results). When the
engine provides ``dyn.graph.autobatch_stats``, the time it spends scheduling (outside the kernels)
is reported per node and as a share of the autobatched step time.

    python bench/autobatch.py [--time 30] [--rounds 5] [--out FILE]   # FILE gets the markdown
    python bench/autobatch.py --only tree,tagger --no-torch          # a subset
    python bench/autobatch.py --quick                                # smoke run, < 1 minute
"""

import os

# thread counts are read when the BLAS/OpenMP runtimes load: set them before numpy, dyn or torch
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import datetime  # noqa: E402
import importlib.util  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402
import time  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "tasks"))

import common  # noqa: E402
import numpy as np  # noqa: E402
from settings import Tagger, TreeLSTM  # noqa: E402
from tagger_handbatched import HandBatchedTagger  # noqa: E402

import dyn as dy  # noqa: E402
import dyn.graph  # noqa: E402

LOSS_TOL = 1e-4  # relative: float32 sums of 64 losses, reassociated by batching
GRAD_TOL = 1e-3  # relative to the largest gradient entry


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=None, help="data folder (default: $DYN_DATA, else ../shared/data)")
    p.add_argument("--time", type=float, default=30.0, help="training seconds per configuration (all rounds)")
    p.add_argument("--rounds", type=int, default=5, help="alternation rounds")
    p.add_argument("--batch", type=int, default=64, help="examples per graph")
    p.add_argument(
        "--only",
        default=",".join(TASKS),
        help="comma-separated tasks among %s (tagger-sorted: the tagger on minibatches of sentences "
        "of similar length, i.e. little padding for hand batching)" % ", ".join(TASKS),
    )
    p.add_argument("--dense", action="store_true", help="dense instead of sparse Adam updates")
    p.add_argument("--no-torch", action="store_true", help="skip PyTorch")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="tiny data slices, 2 short rounds (smoke run)")
    p.add_argument(
        "--allow-mismatch",
        action="store_true",
        help="go on when the first-minibatch check fails (the results then say so)",
    )
    p.add_argument("--out", default=None, help="write the markdown section to this file")
    args, _ = p.parse_known_args(argv)  # DyNet's --dynet-* flags are left to dyn
    args.data = args.data or common.default_data_dir()
    if args.quick:
        args.time, args.rounds = min(args.time, 2.0), min(args.rounds, 2)
    args.tasks = [t.strip() for t in args.only.split(",") if t.strip()]
    unknown = [t for t in args.tasks if t not in TASKS]
    if unknown or not args.tasks:
        p.error(
            "--only: unknown task(s) %s; choose among %s" % (", ".join(unknown) or "(none)", ", ".join(TASKS))
        )
    return args


def emit(**kv):
    for k, v in kv.items():
        if isinstance(v, float):
            v = "%.4g" % v
        print("%s=%s" % (k, v))
    sys.stdout.flush()


def chunks(items, n):
    """Whole minibatches of n (all items in one when there are fewer than n)."""
    out = [items[i : i + n] for i in range(0, len(items) - n + 1, n)]
    return out or [items]


# --------------------------------------------------------------------------- checks


def _params(model):
    return model.parameters_list() + model.lookup_parameters_list()


def zero_grads(model):
    for p in _params(model):
        p.scale_gradient(0.0)


def grads(model):
    return [p.grad_as_array() for p in _params(model)]


def rel_diff(a, b):
    return abs(a - b) / max(abs(a), abs(b), 1e-30)


def grad_rel_diff(ga, gb):
    top = max(float(np.abs(g).max()) for g in ga)
    worst = max(float(np.abs(x - y).max()) for x, y in zip(ga, gb))
    return worst / max(top, 1e-30)


def check_same(model, runs, label, args):
    """Loss and gradients of the first minibatch by each of ``runs`` ({name: fn -> loss expr}).

    The first run is the reference. Gradients are zeroed before and after (no update is made).
    Returns {name: (loss, loss rel diff, grad rel diff)}; stops when a run disagrees (see fail).
    """
    out, ref = {}, None
    for name, fn in runs.items():
        zero_grads(model)
        loss = fn()
        value = loss.value()
        loss.backward()
        g = grads(model)
        if ref is None:
            ref = (value, g)
            out[name] = (value, 0.0, 0.0)
        else:
            out[name] = (value, rel_diff(ref[0], value), grad_rel_diff(ref[1], g))
    zero_grads(model)
    bad = []
    for name, (value, dl, dg) in out.items():
        emit(**{"%s_check_%s_loss" % (label, name): value})
        if name != next(iter(runs)):
            emit(
                **{
                    "%s_check_%s_loss_rel_diff" % (label, name): dl,
                    "%s_check_%s_grad_rel_diff" % (label, name): dg,
                }
            )
            if not (dl <= LOSS_TOL and dg <= GRAD_TOL):
                bad.append(name)
    if bad:
        fail(
            "%s: %s computes a different loss or gradient than %s on the first minibatch"
            % (label, ", ".join(bad), next(iter(runs))),
            args,
        )
    return out


FAILURES = []


def fail(msg, args):
    """A failed check: stop, or with --allow-mismatch go on and say so in the results."""
    print("CHECK FAILED: " + msg)
    sys.stdout.flush()
    if not args.allow_mismatch:
        sys.exit(1)
    FAILURES.append(msg)


# --------------------------------------------------------------------------- timing


class Config:
    """One configuration of a task: ``step(batch) -> sentences`` trains on one minibatch."""

    def __init__(self, name, label, step, batches, autobatched=False, solo=False):
        self.name, self.label, self.step, self.batches = name, label, step, batches
        self.autobatched, self.solo = autobatched, solo
        self.rounds = []  # per round, [(sentences, seconds)] per minibatch, in order
        self.stats, self.loss_sum, self.sents = [], 0.0, 0

    def speeds(self):
        return [sum(n for n, _ in r) / sum(t for _, t in r) for r in self.rounds]


def stats_fn():
    return getattr(dyn.graph, "autobatch_stats", None)


def timed_step(c, batch, stats):
    """One minibatch of configuration c: (sentences, seconds); the engine's counts go to c."""
    if c.autobatched and stats is not None:
        stats(reset=True)
    t0 = time.perf_counter()
    n = c.step(batch)
    dt = time.perf_counter() - t0
    if c.autobatched and stats is not None:
        acc = c.stats[-1]
        for k, v in stats().items():
            if isinstance(v, (int, float)) and k not in ("steps", "elapsed"):
                acc[k] = acc.get(k, 0) + v
        acc["steps"] += 1
        acc["elapsed"] += dt
    return n, dt


def run_rounds(configs, args, nbatches):
    """Alternates the configurations for args.rounds rounds; fills each one's rounds and stats.

    In a round every configuration goes through the same sequence of minibatches from the same
    random start, so that ratios are taken on identical work. dyn's configurations alternate
    minibatch by minibatch (the order rotated every minibatch) until they have had
    ``--time / --rounds`` seconds each on average, so they all run the same minibatches under the
    same machine load; a slow configuration (``solo``: PyTorch) then runs for the same time by
    itself, before or after them (alternately).
    """
    budget = args.time / max(args.rounds, 1)
    rng = random.Random(args.seed + 7)
    stats = stats_fn()
    for c in configs:  # warm-up: one untimed minibatch each
        c.step(c.batches[0])
        c.loss_sum = 0.0
    group = [c for c in configs if not c.solo]
    solos = [c for c in configs if c.solo]
    for r in range(args.rounds):
        start = rng.randrange(nbatches)
        for c in configs:
            c.rounds.append([])
            if c.autobatched:
                c.stats.append({"steps": 0, "elapsed": 0.0})

        def spent(c):
            return sum(t for _, t in c.rounds[-1])

        def run_group():
            i = start
            while not group[0].rounds[-1] or sum(spent(c) for c in group) < budget * len(group):
                k = i % len(group)
                for c in group[k:] + group[:k]:
                    c.rounds[-1].append(timed_step(c, c.batches[i % nbatches], stats))
                i += 1

        def run_solo(c):
            i = start
            while not c.rounds[-1] or spent(c) < budget:
                c.rounds[-1].append(timed_step(c, c.batches[i % nbatches], stats))
                i += 1

        if r % 2:
            for c in solos:
                run_solo(c)
        if group:
            run_group()
        if not r % 2:
            for c in solos:
                run_solo(c)
    for c in configs:
        c.sents = sum(n for tr in c.rounds for n, _ in tr)


def paired_ratios(a, b):
    """Per round, a's speed over b's on the minibatches both ran (the common prefix)."""
    out = []
    for ra, rb in zip(a.rounds, b.rounds):
        n = min(len(ra), len(rb))
        out.append(sum(t for _, t in rb[:n]) / sum(t for _, t in ra[:n]))
    return sorted(out)


def summary(configs, task, pairs):
    """key=value lines and table rows: speeds (medians over the rounds) and ratios (medians of
    the per-round ratios on identical minibatches, with their range)."""
    by = {c.name: c for c in configs}
    rows, res = [], {}
    for c in configs:
        sp = c.speeds()
        med = statistics.median(sp)
        res["%s_%s_sents_per_sec" % (task, c.name)] = med
        res["%s_%s_rounds" % (task, c.name)] = ",".join("%.1f" % v for v in sp)
        res["%s_%s_train_loss_per_sent" % (task, c.name)] = c.loss_sum / max(c.sents, 1)
        rows.append([c.label, med, "", ""])
    for num, den, key, text in pairs:
        if num not in by or den not in by:
            continue
        a, b = by[num], by[den]
        paired = paired_ratios(a, b)
        ratio = statistics.median(paired)
        res["%s_%s" % (task, key)] = ratio
        res["%s_%s_range" % (task, key)] = "%.2f-%.2f" % (paired[0], paired[-1])
        res["%s_%s_of_medians" % (task, key)] = statistics.median(a.speeds()) / statistics.median(b.speeds())
        row = rows[[c.name for c in configs].index(num)]
        row[2] = (row[2] + "; " if row[2] else "") + "%s **%.2f×**" % (text, ratio)
        row[3] = (row[3] + "; " if row[3] else "") + "%.2f–%.2f" % (paired[0], paired[-1])
    emit(**res)
    return rows, res


def sched_summary(c, task):
    """Scheduling overhead of the autobatched configuration (n/a without the engine's stats)."""
    out = {"task": task}
    usable = [s for s in c.stats if s.get("nodes")]
    if not usable:
        emit(**{task + "_sched_us_per_node": "n/a", task + "_sched_pct_of_step": "n/a"})
        return None
    per_node = [s["schedule_s"] / s["nodes"] * 1e6 for s in usable]
    pct = [100.0 * s["schedule_s"] / s["elapsed"] for s in usable]
    out.update(
        nodes=statistics.median(s["nodes"] / s["steps"] for s in usable),
        batches=statistics.median(s["batches"] / s["steps"] for s in usable),
        singles=statistics.median(s.get("singles", 0) / s["steps"] for s in usable),
        us_per_node=statistics.median(per_node),
        pct=statistics.median(pct),
        pct_range=(min(pct), max(pct)),
        fwd_ms=statistics.median(1e3 * s.get("forward_s", 0.0) / s["steps"] for s in usable),
        bwd_ms=statistics.median(1e3 * s.get("backward_s", 0.0) / s["steps"] for s in usable),
        sched_ms=statistics.median(1e3 * s["schedule_s"] / s["steps"] for s in usable),
        step_ms=statistics.median(1e3 * s["elapsed"] / s["steps"] for s in usable),
    )
    emit(
        **{
            task + "_nodes_per_step": out["nodes"],
            task + "_batches_per_step": out["batches"],
            task + "_singles_per_step": out["singles"],
            task + "_sched_us_per_node": out["us_per_node"],
            task + "_sched_pct_of_step": out["pct"],
            task + "_sched_ms_per_step": out["sched_ms"],
            task + "_forward_ms_per_step": out["fwd_ms"],
            task + "_backward_ms_per_step": out["bwd_ms"],
            task + "_step_ms": out["step_ms"],
        }
    )
    return out


# --------------------------------------------------------------------------- Tree-LSTM


def _load_torch(args):
    if args.no_torch:
        return None, "skipped (--no-torch)"
    try:
        import torch  # noqa: F401  (the peer module would exit without it)
    except ImportError:
        return None, "skipped: torch is not installed"
    spec = importlib.util.spec_from_file_location("peer_treelstm", os.path.join(HERE, "peers", "treelstm.py"))
    peer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peer)  # imports torch (threads from OMP_NUM_THREADS = 1)
    peer.torch.set_num_threads(1)
    return peer, "PyTorch %s eager" % peer.torch.__version__


def tree_task(args):
    ns = argparse.Namespace(data=args.data, quick=args.quick)
    train, _, vw = common.sst(ns)
    # (3 of SST's training trees have a unary inner node: both models treat the absent child as zero)
    trees = list(train)
    rng = random.Random(args.seed)
    rng.shuffle(trees)
    batches = chunks(trees, args.batch)
    H, EMB, NLABELS = TreeLSTM.hidden, TreeLSTM.wembed, TreeLSTM.labels
    emit(tree_train_trees=len(trees), tree_batches=len(batches))

    model = dy.ParameterCollection()
    trainer = common.dyn_trainer(dy, model, not args.dense)
    E = model.add_lookup_parameters((len(vw), EMB))
    builder = dy.NaryTreeLSTMBuilder(2, 1, EMB, H, model)
    pW = model.add_parameters((NLABELS, H))
    pb = model.add_parameters(NLABELS)
    UNK = vw.w2i["_UNK_"]

    # ---- the user's per-example code
    def encode(tree):
        if tree.is_leaf():
            return builder.add_input(E[vw.w2i.get(tree.word, UNK)])
        return builder.compose([encode(c) for c in tree.children])

    def tree_loss(tree):
        W, b = dy.parameter(pW), dy.parameter(pb)
        return dy.pickneglogsoftmax(dy.affine_transform([b, W, encode(tree).output()]), tree.label)

    def graph_loss(batch, autobatching):
        dy.renew_cg(autobatching=autobatching)
        losses = [tree_loss(t) for t in batch]
        return dy.esum(losses)

    def make_step(autobatching, cfg):
        def step(batch):
            loss = graph_loss(batch, autobatching)
            cfg.loss_sum += loss.value()
            loss.backward()
            trainer.update()
            return len(batch)

        return step

    sys.setrecursionlimit(10000)
    check = check_same(
        model,
        {"off": lambda: graph_loss(batches[0], False), "on": lambda: graph_loss(batches[0], True)},
        "tree",
        args,
    )

    configs = [
        Config("off", "dyn, autobatching off", None, batches),
        Config("on", "dyn, autobatching on", None, batches, autobatched=True),
    ]
    configs[0].step, configs[1].step = make_step(False, configs[0]), make_step(True, configs[1])

    peer, torch_note = _load_torch(args)
    emit(tree_torch=torch_note)
    torch_check = None
    if peer is not None:
        torch = peer.torch
        F = torch.nn.functional
        tmodel = peer.TreeLSTM(len(vw), EMB, H, NLABELS, not args.dense)
        Wx, U, b = (torch.tensor(p.as_array(), dtype=torch.float32) for p in builder.get_parameters()[0])
        with torch.no_grad():  # dyn's gate rows [i; o; u; f_0; f_1]: the peer's layout
            tmodel.emb.weight.copy_(torch.tensor(E.as_array()))
            tmodel.W.weight.copy_(Wx[: 3 * H])
            tmodel.W.bias.copy_(b[: 3 * H])
            tmodel.U.weight.copy_(U)
            tmodel.U.bias.copy_(b)
            tmodel.out.weight.copy_(torch.tensor(pW.as_array()))
            tmodel.out.bias.copy_(torch.tensor(pb.as_array()))
        opt = peer.Adam(tmodel, not args.dense)

        def titem(t):
            ids = {n: torch.tensor(i) for n, i in common.leaf_ids(t, vw).items()}
            return t, ids, torch.tensor([t.label])

        tbatches = [[titem(t) for t in batch] for batch in batches]

        def torch_loss(batch):
            losses = [F.cross_entropy(tmodel(t, ids).unsqueeze(0), label) for t, ids, label in batch]
            return torch.stack(losses).sum()

        with torch.no_grad():
            tl = float(torch_loss(tbatches[0]))
        torch_check = rel_diff(check["off"][0], tl)
        emit(tree_check_torch_loss=tl, tree_check_torch_loss_rel_diff=torch_check)
        if not torch_check <= LOSS_TOL:
            fail("tree: PyTorch's loss differs from dyn's on the first minibatch", args)
        tcfg = Config("torch", torch_note, None, tbatches, solo=True)

        def torch_step(batch):
            opt.zero_grad()
            loss = torch_loss(batch)
            tcfg.loss_sum += loss.item()
            loss.backward()
            opt.step()
            return len(batch)

        tcfg.step = torch_step
        configs.append(tcfg)

    run_rounds(configs, args, len(batches))
    rows, res = summary(
        configs,
        "tree",
        [("on", "off", "speedup", "vs off"), ("on", "torch", "on_over_torch", "on / PyTorch")],
    )
    sched = sched_summary(configs[1], "tree")
    checks = ["autobatching on vs off: loss %.1e, gradients %.1e" % check["on"][1:]]
    if torch_check is not None:
        checks.append("PyTorch vs dyn: loss %.1e" % torch_check)
    note = None if peer is not None else torch_note
    return {
        "torch": peer is not None,
        "title": "Tree-LSTM (SST)",
        "rows": rows,
        "res": res,
        "sched": sched,
        "checks": checks,
        "note": note,
    }


# --------------------------------------------------------------------------- BiLSTM tagger


def tagger_task(args, sorted_batches=False):
    key = "tagger_sorted" if sorted_batches else "tagger"
    ns = argparse.Namespace(data=args.data, quick=args.quick)
    train, _, vw, vt, _, _ = common.tagging(ns)
    ntags = len(vt)
    data = common.tagged_ids(train, vw, vt)
    rng = random.Random(args.seed)
    rng.shuffle(data)
    if sorted_batches:  # similar lengths together, minibatches in random order
        data.sort(key=lambda s: len(s[0]))
        batches = chunks(data, args.batch)
        rng.shuffle(batches)
    else:
        batches = chunks(data, args.batch)
    EMB, HID, MLP = Tagger.wembed, Tagger.hidden, Tagger.mlp

    model = dy.ParameterCollection()
    trainer = common.dyn_trainer(dy, model, not args.dense)
    E = model.add_lookup_parameters((len(vw) + 1, EMB))  # the last row: hand batching's padding word
    pH = model.add_parameters((MLP, HID * 2))
    pO = model.add_parameters((ntags, MLP))
    fwdRNN = dy.VanillaLSTMBuilder(1, EMB, HID, model)
    bwdRNN = dy.VanillaLSTMBuilder(1, EMB, HID, model)

    # ---- the user's per-sentence code (bench/tasks/bilstm_tagger.py, without its renew_cg)
    def sent_loss(words, tags):
        H, O_ = dy.parameter(pH), dy.parameter(pO)
        wembs = [E[w] for w in words]
        fw_exps = fwdRNN.initial_state().transduce(wembs)
        bw_exps = bwdRNN.initial_state().transduce(reversed(wembs))
        bi_exps = [dy.concatenate([f, b]) for f, b in zip(fw_exps, reversed(bw_exps))]
        return dy.esum([dy.pickneglogsoftmax(O_ * dy.tanh(H * x), t) for x, t in zip(bi_exps, tags)])

    def graph_loss(batch, autobatching):
        dy.renew_cg(autobatching=autobatching)
        losses = [sent_loss(ws, ts) for ws, ts in batch]
        return dy.esum(losses)

    # ---- the same model batched by hand, on the same minibatches (padded once, up front)
    hand = HandBatchedTagger(E, pH, pO, fwdRNN, bwdRNN, len(vw), ntags)
    hbatches = [hand.batch(b) for b in batches]
    pad_eff = sum(b.words for b in hbatches) / sum(b.size * len(b.fwd_ids) for b in hbatches)
    emit(
        **{
            key + "_train_sents": len(data),
            key + "_batches": len(batches),
            key + "_hand_padding_efficiency": pad_eff,
        }
    )

    def hand_loss(hb):
        dy.renew_cg(autobatching=False)
        return hand.loss(hb)

    check = check_same(
        model,
        {
            "off": lambda: graph_loss(batches[0], False),
            "on": lambda: graph_loss(batches[0], True),
            "hand": lambda: hand_loss(hbatches[0]),
        },
        key,
        args,
    )

    configs = [
        Config("off", "dyn, autobatching off", None, batches),
        Config("on", "dyn, autobatching on", None, batches, autobatched=True),
        Config("hand", "dyn, hand-batched (padding, masks)", None, hbatches),
    ]

    def make_step(cfg, loss_fn):
        def step(batch):
            loss = loss_fn(batch)
            cfg.loss_sum += loss.value()
            loss.backward()
            trainer.update()
            return len(batch) if isinstance(batch, list) else batch.size

        return step

    configs[0].step = make_step(configs[0], lambda b: graph_loss(b, False))
    configs[1].step = make_step(configs[1], lambda b: graph_loss(b, True))
    configs[2].step = make_step(configs[2], hand_loss)

    run_rounds(configs, args, len(batches))
    rows, res = summary(
        configs, key, [("on", "off", "speedup", "vs off"), ("on", "hand", "on_over_hand", "on / hand")]
    )
    rows[2][0] = "dyn, hand-batched (padding and masks; %d%% of the padded positions are words)" % round(
        100 * pad_eff
    )
    sched = sched_summary(configs[1], key)
    checks = [
        "autobatching on vs off: loss %.1e, gradients %.1e" % check["on"][1:],
        "hand-batched vs per-sentence: loss %.1e, gradients %.1e" % check["hand"][1:],
    ]
    title = "BiLSTM tagger (WikiNER%s)" % (", length-sorted minibatches" if sorted_batches else "")
    return {"title": title, "rows": rows, "res": res, "sched": sched, "checks": checks, "note": None}


# --------------------------------------------------------------------------- report


def cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def markdown(results, args, engine):
    today = datetime.date.today().isoformat()
    argv, skip = [], False
    for a in sys.argv[1:]:  # the command line, less --out FILE
        if skip or a == "--out" or a.startswith("--out="):
            skip = a == "--out"
            continue
        argv.append(a)
    cmd = " ".join(["python bench/autobatch.py"] + argv)
    torch_ran = any(r.get("torch") for r in results)
    tagger_ran = any(r["title"].startswith("BiLSTM") for r in results)
    intro = (
        "Per-example code (one loss per tree or sentence, `dy.esum` of %d of them per graph, one "
        "`backward` and %s Adam update per graph), with `dy.renew_cg(autobatching=False/True)`%s%s. "
        "%d rounds of %.3g s per configuration: in each, dyn's configurations alternate minibatch by "
        "minibatch through the same minibatches%s. Sentences/s are medians over the rounds; a ratio is "
        "the median over the rounds of the two configurations' speed ratio on the minibatches both ran "
        "(the range of these per-round ratios after it). Single-threaded."
        % (
            args.batch,
            "dense" if args.dense else "sparse",
            "; the Tree-LSTM also in PyTorch eager (same model and initial weights, %d trees per step)"
            % args.batch
            if torch_ran
            else "",
            "; the tagger also batched by hand" if tagger_ran else "",
            args.rounds,
            args.time / max(args.rounds, 1),
            ", PyTorch then runs alone from the same start" if torch_ran else "",
        )
    )
    lines = [
        "## Automatic batching (`bench/autobatch.py`)",
        "",
        textwrap.fill(intro, 100, break_on_hyphens=False),
        "",
        "    " + cmd.strip(),
        "",
        "Measured %s on %s (%s, %d cores, Python %s, numpy %s); autobatching engine: %s."
        % (
            today,
            cpu_model(),
            platform.system(),
            os.cpu_count() or 0,
            platform.python_version(),
            np.__version__,
            engine,
        ),
        "",
        "| task, %d examples per graph | configuration | sentences/s | ratio | per-round ratios |"
        % args.batch,
        "|---|---|---|---|---|",
    ]
    for r in results:
        for row in r["rows"]:
            lines.append(
                "| %s | %s | %.1f | %s | %s |" % (r["title"], row[0], row[1], row[2] or "", row[3] or "")
            )
    lines += ["", "Scheduling overhead of the autobatched steps (the engine's `autobatch_stats`):", ""]
    if any(r["sched"] for r in results):
        lines += [
            "| task | nodes per graph | batches per graph | scheduling µs per node | scheduling, % of step "
            "| step ms (scheduling / forward / backward) |",
            "|---|---|---|---|---|---|",
        ]
        for r in results:
            s = r["sched"]
            if s is None:
                lines.append("| %s | n/a | n/a | n/a | n/a | n/a |" % r["title"])
                continue
            lines.append(
                "| %s | %.0f | %.0f | %.3f | %.1f%% (%.1f–%.1f) | %.1f (%.1f / %.1f / %.1f) |"
                % (
                    r["title"],
                    s["nodes"],
                    s["batches"],
                    s["us_per_node"],
                    s["pct"],
                    *s["pct_range"],
                    s["step_ms"],
                    s["sched_ms"],
                    s["fwd_ms"],
                    s["bwd_ms"],
                )
            )
    else:
        lines.append("n/a (`dyn.graph.autobatch_stats` is not available)")
    lines += ["", "Checks on the first minibatch (relative differences):", ""]
    lines += ["- **CHECK FAILED** (run with --allow-mismatch): %s." % msg for msg in FAILURES]
    for r in results:
        lines.append("- %s: %s." % (r["title"], "; ".join(r["checks"])))
        if r["note"]:
            lines.append("- %s: PyTorch %s." % (r["title"], r["note"]))
    return "\n".join(lines) + "\n"


TASKS = {
    "tree": tree_task,
    "tagger": tagger_task,
    "tagger-sorted": lambda args: tagger_task(args, sorted_batches=True),
}


def main(argv=None):
    args = parse_args(argv)
    t0 = time.time()
    stats = stats_fn()
    engine = "present" if stats is not None else "absent (autobatching=True runs unbatched)"
    emit(
        engine=engine.split()[0],
        data=args.data,
        batch=args.batch,
        rounds=args.rounds,
        time_per_config=args.time,
    )
    results = []
    for name in TASKS:
        if name in args.tasks:
            results.append(TASKS[name](args))
    text = markdown(results, args, engine)
    print()
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    emit(total_time=time.time() - t0)


if __name__ == "__main__":
    main()
