"""Check that the RNN LM of bench/tasks/rnnlm.py (dyn) and bench/peers/rnnlm.py (PyTorch) are the
same model: copy dyn's initial weights into the PyTorch model, train both on the same minibatches
with Adam (lr 0.001, no clipping) and print the two losses step by step.

The gate rows differ ([i; f; o; g] in dyn, [i; f; g; o] in nn.LSTM) and dyn adds its forget bias
of 1 at every step where PyTorch starts the forget-gate bias at 1; both give the same function
and the same Adam trajectory. The losses agree to float32 rounding at first and then to about
1e-4 (relative, either sign, not growing): different BLAS libraries round differently, and the
two Adams differ in where eps sits (DyNet's lr_t m / (sqrt(v) + eps) against PyTorch's
bias-corrected sqrt(v) + eps), which moves parameters whose gradients are near eps apart.
Needs torch; exits 1 when a loss differs by more than --rtol.

    python bench/rnnlm_check.py [DATA] [--minibatch 16] [--steps 30]
"""

import importlib.util
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "tasks"))
sys.path.insert(0, os.path.dirname(HERE))

import common  # noqa: E402
import numpy as np  # noqa: E402
from settings import RNNLM  # noqa: E402


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0], sparse=False)
    p.add_argument("--minibatch", type=int, default=RNNLM.minibatch)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--rtol", type=float, default=2e-3)
    args = common.parse(p, argv)
    if importlib.util.find_spec("torch") is None:
        print("skipped=torch is not installed")
        return 0
    task = load("dyn_rnnlm", os.path.join(HERE, "tasks", "rnnlm.py"))
    peer = load("torch_rnnlm", os.path.join(HERE, "peers", "rnnlm.py"))
    dy, torch = task.dy, peer.torch

    args.quick = True  # a slice of the training data is enough
    train, _, vw, S = common.lm_data(args, quick_train=1000)
    H, E = RNNLM.hidden, RNNLM.wembed

    model = dy.Model()
    trainer = common.dyn_trainer(dy, model, sparse=True)  # dyn's default (exact: as dense updates)
    lm = task.RNNLM(model, len(vw), E, H, S)
    tlm = peer.LM(len(vw), E, H, sparse=False)
    Wx, Wh, b = lm.RNN.get_parameters()[0]

    def gates(a):  # dyn's rows [i; f; o; g] -> PyTorch's [i; f; g; o]
        return torch.tensor(np.concatenate([a[: 2 * H], a[3 * H :], a[2 * H : 3 * H]]))

    with torch.no_grad():
        tlm.emb.weight.copy_(torch.tensor(lm.WORDS_LOOKUP.as_array()))
        tlm.out.weight.copy_(torch.tensor(lm.W_sm.as_array()))
        tlm.out.bias.copy_(torch.tensor(lm.b_sm.as_array()))
        tlm.lstm.weight_ih_l0.copy_(gates(Wx.as_array()))
        tlm.lstm.weight_hh_l0.copy_(gates(Wh.as_array()))
        bias = gates(b.as_array())
        bias[H : 2 * H] += lm.RNN.forget_bias
        tlm.lstm.bias_ih_l0.copy_(bias)
    opt = peer.Adam(tlm, sparse=False)

    mbs = common.lm_minibatches(train, args.minibatch)
    random.shuffle(mbs)
    worst = 0.0
    for k, mb in enumerate(mbs[: args.steps]):
        loss, n = lm.loss(mb)
        dv = loss.scalar_value()
        loss.backward()
        trainer.update()
        inp, tgt, mask, _ = peer.tensors(mb, S)
        opt.zero_grad()
        tl = tlm.loss(inp, tgt, mask)
        tl.backward()
        opt.step()
        tv = tl.item()
        rel = abs(dv - tv) / abs(tv)
        worst = max(worst, rel)
        print("step %3d  words %4d  loss/word dyn %.5f  PyTorch %.5f  rel %.1e" % (k, n, dv / n, tv / n, rel))
    print("max_rel_diff=%.2e" % worst)
    return 0 if worst <= args.rtol else 1


if __name__ == "__main__":
    sys.exit(main())
