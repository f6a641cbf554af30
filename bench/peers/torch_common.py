"""Shared pieces of the PyTorch peers: torch import with a clear message, threads, Adam/SparseAdam,
DyNet's default initialisation.

The peers read and prepare data through bench/tasks/common.py, the same pipeline as the dyn
programs, with the same settings (bench/tasks/settings.py).
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tasks"))

import common  # noqa: E402,F401  (sets the startup clock before torch is imported)
import settings  # noqa: E402,F401

try:
    import torch  # noqa: E402
except ImportError:  # pragma: no cover - peers run only where torch is installed
    print("skipped=torch is not installed")
    sys.exit(0)

torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
torch.manual_seed(1)


def device_of(args):
    """The peer's torch device (--torch-device): cpu, or cuda where a CUDA GPU is usable (else a
    clear error)."""
    dev = torch.device(args.torch_device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--torch-device %s: this PyTorch has no usable CUDA GPU" % args.torch_device)
    return dev


def to_device(x, dev):
    """Tensors (also inside tuples, lists and dicts) moved to dev; everything else as it is."""
    if isinstance(x, torch.Tensor):
        return x.to(dev)
    if isinstance(x, (tuple, list)):
        return type(x)(to_device(v, dev) for v in x)
    if isinstance(x, dict):
        return {k: to_device(v, dev) for k, v in x.items()}
    return x


@torch.no_grad()
def dynet_init_(t):
    """DyNet 2.1's default initialiser in place: Glorot uniform U(-s, s), s = sqrt(3k / sum of the
    k dimensions) (a matrix m x n: sqrt(6 / (m + n)); a vector of n: sqrt(3 / n)). A lookup table
    (nn.Embedding's weight) gets it over the whole table, as DyNet 2.1's Python
    add_lookup_parameters does by default. Returns t."""
    s = (3.0 * t.dim() / sum(t.shape)) ** 0.5
    return t.uniform_(-s, s)


@torch.no_grad()
def dynet_lstm_init_(lstm):
    """An nn.LSTM made DyNet's VanillaLSTMBuilder at its defaults: Glorot weights, one bias vector
    (bias_ih; bias_hh zero and frozen, as DyNet has one bias) starting at zero, plus DyNet's
    forget_bias 1 on the forget gate (PyTorch's gate rows are [i; f; g; o])."""
    hidden = lstm.hidden_size
    for name, p in lstm.named_parameters():
        if name.startswith("weight"):
            dynet_init_(p)
        else:
            p.zero_()
            if name.startswith("bias_ih"):
                p[hidden : 2 * hidden] = 1.0
            else:
                p.requires_grad_(False)
    return lstm


class Adam:
    """Adam lr 0.001 (settings.ADAM_LR, no clipping). With sparse=True the sparse embeddings get
    SparseAdam (lazy updates of the rows used, as DyNet's sparse updates) and the rest dense Adam."""

    def __init__(self, module, sparse, lr=settings.ADAM_LR):
        sparse_params = []
        if sparse:
            for m in module.modules():
                if isinstance(m, torch.nn.Embedding) and m.sparse:
                    sparse_params.append(m.weight)
        ids = {id(p) for p in sparse_params}
        dense = [p for p in module.parameters() if id(p) not in ids]
        self.opts = [torch.optim.Adam(dense, lr=lr)]
        if sparse_params:
            self.opts.append(torch.optim.SparseAdam(sparse_params, lr=lr))

    def zero_grad(self):
        for o in self.opts:
            o.zero_grad(set_to_none=True)

    def step(self):
        for o in self.opts:
            o.step()
