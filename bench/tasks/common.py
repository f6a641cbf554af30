"""Shared pieces of the benchmark tasks: data readers, vocabularies, data preparation, argument
parsing, timing loop.

Mirrors neulab/dynet-benchmark's dynet-py scripts: the data formats (ptb text, ``word|tag``
sentences, PTB-style sentiment trees), words seen at most 5 times mapped to an unknown word in
the taggers, Adam (lr 0.001, no clipping), and the timing rule (dev evaluation is not counted in
the training time). Used by both the dyn programs (bench/tasks) and the PyTorch peers
(bench/peers), so that both read and prepare the same data the same way; the sizes, slices and
trainer settings they share are in settings.py. Imports neither dyn nor torch.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import sys
import time
from collections import Counter

import settings

START = time.time()  # process start (near enough): startup_time is measured from here

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _data_rule():
    """dyn/data.py, the one rule for finding the data, loaded by path (this module imports no dyn)."""
    spec = importlib.util.spec_from_file_location("_dyn_data_rule", os.path.join(REPO, "dyn", "data.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


TOOLKITS = ("dyn", "dynet")


def toolkit_name():
    """The --toolkit of the command line (dyn when not given)."""
    argv = sys.argv[1:]
    name = "dyn"
    for i, a in enumerate(argv):
        if a == "--toolkit" and i + 1 < len(argv):
            name = argv[i + 1]
        elif a.startswith("--toolkit="):
            name = a.split("=", 1)[1]
    return name


def toolkit():
    """The toolkit the task runs on: dyn, or DyNet's own Python module with ``--toolkit dynet``
    (the same program through the same API; a task whose dyn feature DyNet lacks takes a
    DyNet-compatible path). Imported here so the startup time counts it."""
    name = toolkit_name()
    if name not in TOOLKITS:
        raise SystemExit("--toolkit: dyn or dynet, got %r" % name)
    if name == "dynet":
        try:
            import dynet
        except ImportError:
            print("skipped=DyNet is not installed in this Python (docs/benchmarks.md says how to build it)")
            sys.exit(0)
        return dynet
    import dyn
    return dyn


def default_data_dir():
    """The data folder when none is given: $DYN_DATA, else ../shared/data beside the repository."""
    folder, _ = _data_rule().data_dir(None)
    return str(folder) if folder is not None else os.path.join(os.getcwd(), "data")


def check_data(args, dataset):
    """Stop with a message saying where the data goes (not a traceback) when args.data lacks it."""
    rule = _data_rule()
    given = None if args.data == default_data_dir() else args.data  # the message names where it came from
    rule.find_data_or_exit(given, need=dataset)


def parser(description, task=None, sparse=True):
    """The tasks' command line; ``task`` (a class of settings.py) adds its size flags."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "data", nargs="?", default=None, help="data folder (default: $DYN_DATA, else ../shared/data)"
    )
    p.add_argument("--time", type=float, default=60.0, help="training time budget in seconds")
    p.add_argument("--quick", action="store_true", help="tiny data slices, a few seconds")
    if sparse:
        p.add_argument("--sparse", action="store_true", help="sparse (lazy) updates of lookup tables")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--eval-every", type=int, default=0, help="evaluate dev every N training items")
    p.add_argument("--items", type=int, default=0,
                   help="train exactly N items (sentences, trees or minibatches): the time budget, "
                   "--quick's included, is then ignored")
    # DyNet's own flags: dyn reads them when it is imported (--dynet-gpus 1 / --dynet-devices GPU:0
    # run the task on the GPU); argparse only has to accept them
    p.add_argument("--dynet-mem", default=None)
    p.add_argument("--dynet-seed", default=None)
    p.add_argument("--dynet-gpus", default=None)
    p.add_argument("--dynet-devices", default=None)
    p.add_argument("--dynet-autobatch", default=None)
    p.add_argument("--phases", action="store_true",
                   help="time each training step's phases: building the graph, forward, backward, update")
    p.add_argument("--ab-compare", action="store_true",
                   help="dyn: train every item twice, with automatic batching off and on (the order "
                   "alternating), and print both speeds and their ratio on the same items")
    p.add_argument("--toolkit", choices=TOOLKITS, default="dyn",
                   help="run the task on dyn or on DyNet itself (common.toolkit)")
    # the PyTorch peers' device (bench/peers/); the dyn tasks take DyNet's flags above
    p.add_argument("--torch-device", default="cpu", help="PyTorch peers: cpu or cuda")
    if task is not None:
        settings.add_flags(p, task)
    return p


def parse(p, argv=None):
    args = p.parse_args(argv)
    args.data = args.data or default_data_dir()
    if args.quick:
        args.time = min(args.time, 5.0)
    random.seed(args.seed)
    return args


# --------------------------------------------------------------------------- readers


def read_text(path, limit=None):
    """PTB text: one sentence per line, tokens split on whitespace."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            toks = line.split()
            if toks:
                out.append(toks)
            if limit and len(out) >= limit:
                break
    return out


def read_tagged(path, limit=None):
    """``word|tag word|tag ...`` lines -> list of [(word, tag), ...] (split on the last ``|``)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            items = [tuple(x.rsplit("|", 1)) for x in line.split()]
            if items:
                out.append(items)
            if limit and len(out) >= limit:
                break
    return out


class Tree:
    """A sentiment tree: ``label`` (int), ``children`` (list of Tree) and ``word`` (leaves only)."""

    __slots__ = ("label", "children", "word")

    def __init__(self, label, children=None, word=None):
        self.label = label
        self.children = children or []
        self.word = word

    def is_leaf(self):
        return not self.children

    def leaves(self):
        if self.is_leaf():
            return [self.word]
        return [w for c in self.children for w in c.leaves()]

    def nodes(self):
        """Post-order list of nodes (children before parents)."""
        out = []
        stack = [(self, False)]
        while stack:
            node, done = stack.pop()
            if done or node.is_leaf():
                out.append(node)
            else:
                stack.append((node, True))
                stack.extend((c, False) for c in reversed(node.children))
        return out


def parse_tree(line):
    """``(3 (2 The) (4 (2 Rock) ...))`` -> Tree. A pre-terminal ``(2 word)`` becomes a leaf."""
    toks = line.replace("(", " ( ").replace(")", " ) ").split()
    pos = 0

    def rec():
        nonlocal pos
        assert toks[pos] == "("
        label = int(toks[pos + 1])
        pos += 2
        if toks[pos] != "(":
            word = toks[pos]
            pos += 2  # word and ")"
            return Tree(label, word=word)
        kids = []
        while toks[pos] == "(":
            kids.append(rec())
        pos += 1  # ")"
        return Tree(label, kids)

    return rec()


def read_trees(path, limit=None):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                out.append(parse_tree(line))
            if limit and len(out) >= limit:
                break
    return out


class Vocab:
    """word <-> id, as dynet-benchmark's util.Vocab (ids in order of first appearance)."""

    def __init__(self, words=()):
        self.w2i = {}
        self.i2w = []
        for w in words:
            self.add(w)

    def add(self, w):
        if w not in self.w2i:
            self.w2i[w] = len(self.i2w)
            self.i2w.append(w)
        return self.w2i[w]

    def __len__(self):
        return len(self.i2w)


# --------------------------------------------------------------------------- data sets


def _read_split(args, dataset, reader, train_path, dev_path, limits):
    """(train, dev) of a data set under args.data, sliced to ``limits`` with --quick."""
    check_data(args, dataset)
    lim_t, lim_d = limits if args.quick else (None, None)
    return reader(os.path.join(args.data, *train_path), lim_t), reader(
        os.path.join(args.data, *dev_path), lim_d
    )


def ptb(args, quick_train=settings.RNNLM.quick_train, quick_dev=settings.RNNLM.quick_dev):
    """PTB as word ids (``<s>`` is id 0; a dev word not in train is ``<unk>``) and the vocabulary."""
    train, dev = _read_split(
        args, "ptb", read_text, ("ptb", "ptb.train.txt"), ("ptb", "ptb.valid.txt"), (quick_train, quick_dev)
    )
    vocab = Vocab(["<s>"])
    for s in train:
        for w in s:
            vocab.add(w)
    unk = vocab.w2i.get("<unk>", 0)
    train_ids = [[vocab.w2i[w] for w in s] for s in train]
    dev_ids = [[vocab.w2i.get(w, unk) for w in s] for s in dev]
    return train_ids, dev_ids, vocab


def lm_data(args, quick_train=settings.RNNLM.quick_train):
    """The RNN LM's sentences: ptb's, each ended by ``<s>``; (train, dev, vocabulary, id of <s>)."""
    train, dev, vocab = ptb(args, quick_train)
    S = vocab.w2i["<s>"]
    return [s + [S] for s in train], [s + [S] for s in dev], vocab, S


def lm_minibatches(sents, size):
    """Sort longest first and cut into minibatches of ``size`` (as the benchmark's train_order)."""
    sents = sorted(sents, key=lambda s: -len(s))
    return [sents[i : i + size] for i in range(0, len(sents), size)]


def tagging(
    args,
    quick_train=settings.Tagger.quick_train,
    quick_dev=settings.Tagger.quick_dev,
    unk_below=settings.Tagger.rare + 1,
):
    """Tagger data; words seen fewer than ``unk_below`` times in train become _UNK_ (as the benchmark)."""
    d = ("tagging", "wikiner-10k")
    train, dev = _read_split(
        args, "tagging", read_tagged, d + ("train.txt",), d + ("dev.txt",), (quick_train, quick_dev)
    )
    wc = Counter(w for s in train for w, _ in s)
    words = Vocab(w for s in train for w, _ in s if wc[w] >= unk_below)
    words.add("_UNK_")
    tags = Vocab(t for s in train for _, t in s)
    chars = Vocab(c for s in train for w, _ in s for c in w)
    chars.add("<*>")  # unknown character / padding
    return train, dev, words, tags, chars, wc


def tagged_ids(sents, vw, vt):
    """[(word ids, tag ids)] of ``word|tag`` sentences: words not in vw are _UNK_, tags not in vt
    (a dev tag never seen in train) 0."""
    unk = vw.w2i["_UNK_"]
    return [([vw.w2i.get(w, unk) for w, _ in s], [vt.w2i.get(t, 0) for _, t in s]) for s in sents]


def word_keys(words, vw, vc, wc):
    """The character tagger's words: a frequent word's id (seen more than settings.Tagger.rare
    times in train), or the tuple of a rare word's character ids between two ``<*>``."""
    pad = vc.w2i["<*>"]
    return [
        vw.w2i[w] if wc[w] > settings.Tagger.rare else tuple([pad] + [vc.w2i.get(c, pad) for c in w] + [pad])
        for w in words
    ]


def char_tagged(sents, vw, vt, vc, wc):
    """[(word keys, tag ids)] of ``word|tag`` sentences for the character tagger (word_keys; tags
    as tagged_ids)."""
    return [(word_keys([w for w, _ in s], vw, vc, wc), [vt.w2i.get(t, 0) for _, t in s]) for s in sents]


def sst(args, quick_train=settings.TreeLSTM.quick_train, quick_dev=settings.TreeLSTM.quick_dev):
    """SST trees and the vocabulary of their training leaves (with _UNK_)."""
    train, dev = _read_split(
        args, "sst", read_trees, ("sst", "train.txt"), ("sst", "dev.txt"), (quick_train, quick_dev)
    )
    words = Vocab(w for t in train for w in t.leaves())
    words.add("_UNK_")
    return train, dev, words


def leaf_ids(tree, vw):
    """{leaf: word id} of a tree (a word not in vw is _UNK_)."""
    unk = vw.w2i["_UNK_"]
    return {n: vw.w2i.get(n.word, unk) for n in tree.nodes() if n.is_leaf()}


def dyn_trainer(dy, model, sparse):
    """The tasks' trainer in dyn (the module ``dy`` given): Adam at settings.ADAM_LR, no clipping,
    sparse (lazy) updates of lookup tables or dense ones."""
    trainer = dy.AdamTrainer(model, settings.ADAM_LR)
    trainer.set_clip_threshold(settings.NO_CLIP)
    trainer.set_sparse_updates(sparse)
    return trainer


# --------------------------------------------------------------------------- timing loop


class Phases:
    """A training step in its four phases: build the loss expression, its forward pass
    (scalar_value), backward, the trainer's update. With --phases each is timed, and train_loop
    prints the microseconds per item of each (phase_build_us=... and so on); with --ab-compare as
    well, each phase twice, for the engine off and on (phase_build_us_ab_off=...), on the same
    items. The clock is read either way (five reads, well under a microsecond, against steps of
    tens of microseconds and more)."""

    NAMES = ("build", "forward", "backward", "update")

    def __init__(self, args):
        self.on = bool(getattr(args, "phases", False))
        self.state = None  # dyn's settings, read for the engine's flag under --ab-compare
        if self.on and getattr(args, "ab_compare", False):
            from dyn._config import state

            self.state = state
        self.total = {}  # key (None, or the engine's flag) -> phase -> seconds
        self.items = {}

    def step(self, build, trainer):
        """build() -> (loss expression, units); returns (loss value, units)."""
        t0 = time.perf_counter()
        loss, n = build()
        t1 = time.perf_counter()
        value = loss.scalar_value()
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        trainer.update()
        t4 = time.perf_counter()
        key = None if self.state is None else bool(self.state["autobatch"])
        total = self.total.setdefault(key, dict.fromkeys(self.NAMES, 0.0))
        for k, a, b in zip(self.NAMES, (t0, t1, t2, t3), (t1, t2, t3, t4)):
            total[k] += b - a
        self.items[key] = self.items.get(key, 0) + 1
        return value, n

    def summary(self):
        if not self.on:
            return {}
        out = {}
        for key, total in self.total.items():
            tail = "" if key is None else ("_ab_on" if key else "_ab_off")
            for k, v in total.items():
                out["phase_%s_us%s" % (k, tail)] = 1e6 * v / self.items[key]
        return out


class ABCompare:
    """--ab-compare: each training item runs twice, with dyn's automatic batching off and on (which
    goes first alternates item by item), each run timed; the ratio of the two speeds is on exactly
    the same items, so the machine's drift cancels out. Both runs update the model."""

    def __init__(self):
        if toolkit_name() != "dyn":
            raise SystemExit("--ab-compare: dyn only (it switches dyn's automatic batching)")
        from dyn._config import state

        self.state, self.default = state, state["autobatch"]
        self.time = {False: 0.0, True: 0.0}
        self.k = 0

    def step(self, step, item):
        """step(item) with the engine off and on; returns its result and the mean of the two times
        (what train_loop's time budget counts)."""
        order = (False, True) if self.k % 2 == 0 else (True, False)
        self.k += 1
        both = 0.0
        try:
            for flag in order:
                self.state["autobatch"] = flag
                t0 = time.perf_counter()
                out = step(item)
                dt = time.perf_counter() - t0
                self.time[flag] += dt
                both += dt
        finally:
            self.state["autobatch"] = self.default
        return out, both / 2

    def summary(self, unit, units):
        off, on = self.time[False], self.time[True]
        return {
            unit + "_per_sec_ab_off": units / max(off, 1e-9),
            unit + "_per_sec_ab_on": units / max(on, 1e-9),
            "ab_on_off": off / max(on, 1e-9),
        }


def emit(**kv):
    for k, v in kv.items():
        if isinstance(v, float):
            v = "%.4f" % v
        print("%s=%s" % (k, v))
    sys.stdout.flush()


def train_loop(args, train, step, evaluate, unit, batches=None, phases=None):
    """Train until ``args.time`` seconds of training (dev evaluation excluded) have passed, or,
    with ``args.items``, for exactly that many items whatever the time: a run compared with
    another (CPU against GPU, dyn against DyNet) must not stop early because it was slower, as a
    GPU is on its first sentences while its kernels compile.

    ``step(item) -> (loss_sum, n_units)`` trains on one item (a sentence, a tree or a minibatch);
    ``evaluate() -> dict`` of dev metrics. Prints startup_time, the speed (``<unit>_per_sec``)
    and the last dev metrics as key=value lines and returns them as a dict.
    """
    startup = time.time() - START
    emit(startup_time=startup)
    items = list(batches if batches is not None else train)
    train_time = 0.0
    done_units = 0
    done_items = 0
    loss_sum = 0.0
    epoch = 0
    last = {}
    eval_every = args.eval_every or max(len(items), 1)
    since_eval = 0
    finished = False
    ab = ABCompare() if getattr(args, "ab_compare", False) else None
    while not finished:
        epoch += 1
        random.shuffle(items)
        for item in items:
            if ab is not None:
                (loss, n), dt = ab.step(step, item)
                train_time += dt
            else:
                t0 = time.time()
                loss, n = step(item)
                train_time += time.time() - t0
            loss_sum += loss
            done_units += n
            done_items += 1
            since_eval += 1
            finished = done_items >= args.items if args.items else train_time >= args.time
            if finished or since_eval >= eval_every:
                since_eval = 0
                last = evaluate()
                emit(
                    epoch=epoch,
                    train_time=train_time,
                    train_loss=loss_sum / max(done_units, 1),
                    **{unit + "_per_sec": done_units / max(train_time, 1e-9)},
                    **last,
                )
                if finished:
                    break
    result = {"startup_time": startup, unit + "_per_sec": done_units / max(train_time, 1e-9)}
    result.update(last)
    if phases is not None:
        result.update(phases.summary())
    if ab is not None:
        result.update(ab.summary(unit, done_units))
    print("# final")
    emit(**result, items=done_items, epochs=epoch)
    return result
