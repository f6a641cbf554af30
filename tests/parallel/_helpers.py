"""A small model with dense weights and a lookup table, its data, and an
in-process Exchange of threads, shared by the tests of dyn.parallel."""

from __future__ import annotations

import threading

import numpy as np

import dyn as dy
from dyn.parallel import Exchange

VOCAB, DIM, HID, CLASSES = 40, 6, 8, 3


# trainer name -> factory; every trainer of dyn.trainers that keeps per-parameter state, and plain SGD
TRAINERS = {
    "sgd": lambda m: dy.SimpleSGDTrainer(m, 0.05),
    "momentum": lambda m: dy.MomentumSGDTrainer(m, 0.01, 0.9),
    "adagrad": lambda m: dy.AdagradTrainer(m, 0.05),
    "adadelta": lambda m: dy.AdadeltaTrainer(m),
    "rmsprop": lambda m: dy.RMSPropTrainer(m, 0.01),
    "adam": lambda m: dy.AdamTrainer(m, 0.01),
    "amsgrad": lambda m: dy.AmsgradTrainer(m, 0.01),
    "smorms3": lambda m: dy.SMORMS3Trainer(m, 0.01),
}


def make_data(n, seed=0):
    """n examples (token ids, label); the label is a function of the tokens, so it can be learned."""
    rng = np.random.RandomState(seed)
    data = []
    for _ in range(n):
        toks = [int(t) for t in rng.randint(0, VOCAB, size=rng.randint(2, 6))]
        data.append((toks, int(sum(toks) % CLASSES)))
    return data


class Model:
    """Bag of embeddings -> tanh layer -> softmax: dense W1, b1, W2 and a lookup table E."""

    def __init__(self, seed=1):
        rng = np.random.RandomState(seed)
        self.m = dy.ParameterCollection()
        self.E = self.m.lookup_parameters_from_numpy(rng.randn(VOCAB, DIM) * 0.5, name="E")
        self.W1 = self.m.parameters_from_numpy(rng.randn(HID, DIM) * 0.5, name="W1")
        self.b1 = self.m.parameters_from_numpy(rng.randn(HID) * 0.1, name="b1")
        self.W2 = self.m.parameters_from_numpy(rng.randn(CLASSES, HID) * 0.5, name="W2")

    def example_loss(self, toks, label):
        x = dy.esum([dy.lookup(self.E, t) for t in toks])
        h = dy.tanh(self.W1 * x + self.b1)
        return dy.pickneglogsoftmax(self.W2 * h, label)

    def loss(self, batch):
        """The batch's summed loss (what dyn.parallel.train's loss_fn returns)."""
        return dy.esum([self.example_loss(t, y) for t, y in batch])

    def whole_table_loss(self, batch):
        """Like loss, but reads the table as a matrix (the table is 'used whole')."""
        E = dy.parameter(self.E)
        terms = []
        for toks, label in batch:
            onehot = np.zeros(VOCAB)
            for t in toks:
                onehot[t] += 1
            h = dy.tanh(self.W1 * (E * dy.inputTensor(onehot)) + self.b1)
            terms.append(dy.pickneglogsoftmax(self.W2 * h, label))
        return dy.esum(terms)

    def params(self):
        return {
            "E": self.E.as_array(),
            "W1": self.W1.as_array(),
            "b1": self.b1.as_array(),
            "W2": self.W2.as_array(),
        }


class ThreadExchange(Exchange):
    """size ranks as threads of one process (a reference transport for tests):
    collectives meet at a barrier and reduce in rank order."""

    def __init__(self, rank, shared):
        self.rank, self.size, self.s = rank, shared["size"], shared

    @staticmethod
    def group(size):
        shared = {"size": size, "barrier": threading.Barrier(size), "slots": [None] * size}
        return [ThreadExchange(r, shared) for r in range(size)]

    def _all(self, item):
        self.s["slots"][self.rank] = item
        self.s["barrier"].wait()
        items = list(self.s["slots"])
        self.s["barrier"].wait()
        return items

    def allreduce_sum(self, buf):
        items = self._all(buf.copy())
        total = items[0].copy()
        for x in items[1:]:
            total += x
        buf[:] = total

    def allgather_rows(self, idx, rows):
        items = self._all((np.asarray(idx, np.int64), np.asarray(rows)))
        return np.concatenate([i for i, _ in items]), np.concatenate([r for _, r in items])

    def broadcast(self, buf, root=0):
        buf[:] = self._all(buf.copy())[root]

    def barrier(self):
        self.s["barrier"].wait()


def run_ranks(fn, exchanges):
    """fn(exchange) on one thread per rank; re-raises the first error."""
    errors = []

    def body(ex):
        try:
            fn(ex)
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            errors.append(e)
            ex.s["barrier"].abort()

    threads = [threading.Thread(target=body, args=(ex,)) for ex in exchanges]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]


def shm_entries():
    """The names in /dev/shm (named shared-memory segments and semaphores) that a run of local
    workers could leave. MPICH's own segments (mpich_shm_*) are left out: an MPI program running
    beside the tests on the same machine makes and removes them at any moment, and local workers
    never create them."""
    import os

    if not os.path.isdir("/dev/shm"):
        return set()
    return {name for name in os.listdir("/dev/shm") if not name.startswith("mpich_shm_")}


def child_pids():
    """Live (not zombie) processes whose parent is this process, from /proc."""
    import os

    me, out = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            out.append(int(entry))
    return out


def write_tagging_data(root, seed=0):
    """A tiny tagging set in the layout of wikiner-10k: the tag is a function of the word."""
    rng = np.random.RandomState(seed)
    words = ["w%d" % i for i in range(24)]
    folder = root / "tagging" / "wikiner-10k"
    folder.mkdir(parents=True)
    for name, n in (("train.txt", 96), ("dev.txt", 40)):
        lines = [
            " ".join("%s|%s" % (words[i], "ABC"[i % 3]) for i in rng.randint(0, 24, rng.randint(3, 9)))
            for _ in range(n)
        ]
        (folder / name).write_text("\n".join(lines) + "\n")
    return str(root)


def tagger_example_args(tmp_path, tag):
    """What the tests give both tagger examples besides the data: 3 epochs at lr 0.01, the figures
    to <tag>.json and the model to <tag>.safetensors. Returns (arguments, the figures' path)."""
    out = str(tmp_path / (tag + ".json"))
    return [
        "--epochs",
        "3",
        "--lr",
        "0.01",
        "--json",
        out,
        "--save",
        str(tmp_path / (tag + ".safetensors")),
    ], out


def read_json(path):
    import json

    with open(path) as f:
        return json.load(f)
