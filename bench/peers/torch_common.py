"""Shared pieces of the PyTorch peers: torch import with a clear message, threads, Adam/SparseAdam.

The peers read data through bench/tasks/common.py, the same pipeline as the dyn programs.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tasks"))

import common  # noqa: E402,F401  (sets the startup clock before torch is imported)

try:
    import torch  # noqa: E402
except ImportError:  # pragma: no cover - peers run only where torch is installed
    print("skipped=torch is not installed")
    sys.exit(0)

torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
torch.manual_seed(1)


class Adam:
    """Adam lr 0.001 (no clipping). With sparse=True the sparse embeddings get SparseAdam
    (lazy updates of the rows used, as DyNet's sparse updates) and the rest dense Adam."""

    def __init__(self, module, sparse, lr=0.001):
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
