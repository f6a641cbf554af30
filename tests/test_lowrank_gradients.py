"""A large weight's gradient held back as one product for the Adam step to compute (see "Low-rank
gradients" in dyn/_core/core/graph.pyx): training must give the weights, moments and gradients of
training without it, bit for bit, and every reader of a gradient must see it whole.

The products are held back where dyn_sgemm_nt_tall would compute them (the rules of an AMD
processor with AVX-512); the tests switch those rules on, so that they run on any machine, and
track parameters of any size. Elsewhere with AVX-512 (an Intel Xeon) products are held back over
their own range of columns, and the product they replace is OpenBLAS's: equal to float rounding,
not bit for bit (the last tests)."""

import numpy as np
import pytest

import dyn as dy
from dyn._core.core import graph
from dyn._core.cpu import blas
from dyn._core.train import update

H, N, NE = 128, 9, 50  # hidden size (W's columns), columns of a step's product, lookup rows


def _rules(amd):
    """dyn's register kernels on, the AMD rules on or off, every size tracked; the settings
    restored afterwards."""
    old = (blas._set_skinny(True), blas._set_amd_rules(amd), update._set_lowrank_min(1),
           blas._set_lowrank(1))
    yield
    blas._set_skinny(old[0])
    blas._set_amd_rules(old[1])
    update._set_lowrank_min(old[2])
    blas._set_lowrank(old[3])


@pytest.fixture
def lowrank():
    """dyn_sgemm_nt_tall's rules (an AMD processor with AVX-512)."""
    yield from _rules(True)


class Model:
    def __init__(self, m, seed=0, wd=0.0, hidden=H):
        rng = self.rng = np.random.RandomState(seed)
        self.pc = dy.ParameterCollection()
        if wd:
            self.pc.set_weight_decay(wd)
        self.W = self.pc.add_parameters((m, hidden), init=rng.randn(m, hidden) * 0.1)
        self.b = self.pc.add_parameters(m, init=rng.randn(m) * 0.1)
        self.E = self.pc.add_lookup_parameters((NE, hidden), init=rng.randn(NE, hidden))
        self.m = m

    def loss(self, autobatch=False, per_state=False, twice=False, extra=False, cols=N):
        """A softmax over m words of N hidden states: one product for the batch (or one per state,
        per_state=True), its weight used once more (twice) or read by another op (extra)."""
        dy.renew_cg(autobatching=autobatch)
        ids = self.rng.randint(0, NE, size=cols)
        ys = list(self.rng.randint(0, self.m, size=cols))
        W, b = dy.parameter(self.W), dy.parameter(self.b)
        if per_state:
            loss = dy.esum([dy.pickneglogsoftmax(dy.affine_transform([b, W, dy.tanh(self.E[i])]), y)
                            for i, y in zip(ids, ys)])
        else:
            h = dy.concatenate_to_batch([dy.tanh(self.E[i]) for i in ids])
            s = dy.affine_transform([b, W, h])
            if twice:
                s = s + W * h
            loss = dy.sum_batches(dy.pickneglogsoftmax_batch(s, ys))
        if extra:
            loss = loss + dy.sum_elems(dy.square(W)) * 1e-3
        return loss

    def state(self, trainer):
        out = [p.as_array().copy() for p in (self.W, self.b, self.E)]
        out += [p.grad_as_array().copy() for p in (self.W, self.b)]
        out += [a.copy() for k, a in sorted(trainer.state_dict().items()) if k.startswith("/")]
        return out


def _adam(model, clip=0.0, l2=0.0):
    t = dy.AdamTrainer(model.pc, 0.01)
    t.set_clip_threshold(clip)
    if l2:
        t.set_l2(l2)
    return t


def _compare(scenario, m=1100, exact=True, **kw):
    """Run scenario(model) with products held back (mode 1) and never (mode 0): the parameters,
    gradients and Adam moments must be equal bit for bit (exact) or to float32 rounding. Returns
    (products held back, Adam steps that computed one) in mode 1."""
    results, counts = {}, {}
    for mode in (0, 1):
        blas._set_lowrank(mode)
        c0 = blas._lowrank_counts()
        model = Model(m, **kw)
        trainer = scenario(model)
        results[mode] = model.state(trainer)
        c1 = blas._lowrank_counts()
        counts[mode] = (c1[0] - c0[0], c1[1] - c0[1])
    assert counts[0] == (0, 0)
    assert len(results[0]) == len(results[1])
    for a, b in zip(results[0], results[1]):
        assert a.shape == b.shape
        if exact:
            assert np.array_equal(a, b), "max difference %g" % np.abs(a - b).max()
        else:
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    return counts[1]


def _train(steps=4, clip=0.0, l2=0.0, **loss_kw):
    def scenario(model):
        t = _adam(model, clip, l2)
        for _ in range(steps):
            model.loss(**loss_kw).backward()
            t.update()
        return t

    return scenario


@pytest.mark.parametrize("m", [1024, 1031, 1100, 1104])
def test_training_equal_bit_for_bit(lowrank, m):
    # rows past the last 64-row panel: none, 7, 12 and 16
    held, fused = _compare(_train(), m=m)
    assert held == fused == 3   # every step after the first (the first makes the gradient known zero)


@pytest.mark.parametrize("kw", [{"autobatch": True}, {"per_state": True, "autobatch": True}, {"l2": 1e-3}])
def test_training_equal_engine_steps_l2(lowrank, kw):
    held, fused = _compare(_train(**kw))
    assert held == fused == 3


def test_weight_decay(lowrank):
    held, fused = _compare(_train(), wd=1e-3)
    assert held == fused == 3


def test_weight_used_twice_is_computed_before_the_step(lowrank):
    # the first product is held back, the second written: the step computes the first into the
    # gradient before its own pass
    held, fused = _compare(_train(twice=True))
    assert held == 3 and fused == 0


def test_weight_read_by_another_op_is_not_held_back(lowrank):
    held, fused = _compare(_train(extra=True))
    assert held == fused == 0


def test_one_product_per_state_without_the_engine_is_not_held_back(lowrank):
    held, fused = _compare(_train(per_state=True))   # products of one column each
    assert held == fused == 0


def test_products_over_many_columns_are_not_held_back(lowrank):
    # past 28 columns the product and the step apart were as fast (bench/lowrank_adam.py)
    assert _compare(_train(cols=28)) == (3, 3)
    assert _compare(_train(cols=29)) == (0, 0)


def test_inputs_read_in_place_are_not_held_back(lowrank):
    # an input over the caller's array (or a parameter's values) may change before the step
    def scenario(model):
        t = _adam(model)
        for _ in range(3):
            dy.renew_cg()
            h = np.asfortranarray(model.rng.randn(H, N).astype(np.float32))
            x = dy.inputTensor(h, batched=True)   # reads h where it lies
            s = dy.affine_transform([dy.parameter(model.b), dy.parameter(model.W), x])
            dy.sum_batches(dy.pickneglogsoftmax_batch(s, list(model.rng.randint(0, model.m, N)))).backward()
            h[...] = 0.0
            t.update()
        return t

    assert _compare(scenario) == (0, 0)


def test_clipping_computes_it_first(lowrank):
    # the norm reads every gradient: computed, then the ordinary step (clipping on: DyNet's default)
    held, fused = _compare(_train(clip=5.0))
    assert held == 3 and fused == 0


def _one_step_then(after_backward):
    """A step (the gradient becomes known zero), a backward pass whose product is held back,
    after_backward(model, trainer), then a step."""

    def scenario(model):
        t = _adam(model)
        model.loss().backward()
        t.update()
        model.loss().backward()
        after_backward(model, t)
        t.update()
        return t

    return scenario


def _held_now():
    return [s for s in graph._lowrank_state() if s[0] != 1]


def test_gradient_read_whole(lowrank):
    seen = {}

    def read(model, t):
        seen.setdefault("held", []).append(len(_held_now()))
        seen.setdefault("grad", []).append(model.W.grad_as_array().copy())
        assert not _held_now()

    _compare(_one_step_then(read))
    assert seen["held"] == [0, 1]
    assert np.array_equal(seen["grad"][0], seen["grad"][1]) and np.abs(seen["grad"][1]).max() > 0


def test_parameter_expression_gradient(lowrank):
    seen = []

    def scenario(model):
        t = _adam(model)
        model.loss().backward()
        t.update()
        loss = model.loss()
        W = dy.parameter(model.W)   # the graph's node for W
        loss.backward()
        seen.append(W.gradient().copy())
        t.update()
        return t

    _compare(scenario)
    assert np.array_equal(seen[0], seen[1]) and np.abs(seen[1]).max() > 0


@pytest.mark.parametrize(
    "what",
    ["second_backward", "renew_and_accumulate", "norm_history", "pool_grads", "new_parameters",
     "checkpoint_revert", "invalidate", "scale_gradient", "write_grads"],
)
def test_readers_and_writers_see_the_whole_gradient(lowrank, what):
    def act(model, t):
        if what == "second_backward":
            model.loss().backward()   # (a new graph) and, below, the same graph again
            loss = model.loss()
            loss.backward()
            loss.backward()
        elif what == "renew_and_accumulate":
            dy.renew_cg()
            model.loss().backward()
        elif what == "norm_history":
            t.set_grad_norm_history(True)
        elif what == "pool_grads":
            model.W.pool.grads[model.W.off] += 0.5
        elif what == "new_parameters":
            model.pc.add_parameters((4000, 300))   # the pool grows: moved
        elif what == "checkpoint_revert":
            dy.cg_checkpoint()
            dy.tanh(dy.parameter(model.b))
            dy.cg_revert()
        elif what == "invalidate":
            dy.cg().invalidate()
        elif what == "scale_gradient":
            model.W.scale_gradient(0.5)
        elif what == "write_grads":
            model.W.write_grads((model.W.grad_as_array() * 2).ravel(order="F"))

    held, fused = _compare(_one_step_then(act))
    assert held >= 1


def test_update_subset_keeps_it(lowrank):
    def act(model, t):
        t.update_subset([1], [0])   # b and E: W keeps its (held-back) gradient
        model.loss().backward()     # computed as this pass starts, then added to

    held, fused = _compare(_one_step_then(act))
    assert held == 1 and fused == 0   # (the next pass finds it written: nothing held back there)


def test_another_rule_computes_it_first(lowrank):
    def act(model, t):
        sgd = dy.SimpleSGDTrainer(model.pc, 0.1)
        sgd.set_clip_threshold(0)
        sgd.update()   # computes the held-back product, then its own step

    held, fused = _compare(_one_step_then(act))
    assert held == 1 and fused == 0


def test_off_holds_nothing(lowrank):
    blas._set_lowrank(0)
    c0 = blas._lowrank_counts()
    _train()(Model(1100))
    assert blas._lowrank_counts() == c0
    with pytest.raises(ValueError):
        blas._set_lowrank(3)


def test_more_parameters_than_the_table_holds(lowrank):
    # the longest-tracked gradient known zero makes room: the newest parameter is held back
    for k in range(10):
        c0 = blas._lowrank_counts()
        model = Model(1100, seed=k)
        _train(steps=2)(model)
        c1 = blas._lowrank_counts()
        assert (c1[0] - c0[0], c1[1] - c0[1]) == (1, 1)
    assert len(graph._lowrank_state()) <= 8


@pytest.mark.parametrize("mode", [0, 1])
def test_plain_adam_loops_give_the_same_numbers(lowrank, mode):
    # without clipping, L2 or weight decay the dense loops leave out gs, l2 w and d (_fastopt.h,
    # dyn_adam_plain): the numbers must be the general loop's
    from dyn._core.cpu import optim

    blas._set_lowrank(mode)
    results = []
    for on in (False, True):
        old = optim._set_adam_plain(on), blas._set_adam_plain(on)
        try:
            model = Model(1100)
            results.append(model.state(_train()(model)))
        finally:
            optim._set_adam_plain(old[0])
            blas._set_adam_plain(old[1])
    for a, b in zip(*results):
        assert np.array_equal(a, b), "max difference %g" % np.abs(a - b).max()


@pytest.fixture
def lowrank_intel():
    """The rules of a processor with AVX-512 that is not AMD's (gemm leaves these products to its
    other paths)."""
    yield from _rules(False)


@pytest.mark.parametrize("hidden, most", [(128, 22), (256, 32)])
def test_intel_rules_hold_back_up_to_their_columns(lowrank_intel, hidden, most):
    # on an Intel Xeon the product and step apart were slower up to 32 columns for a C of 256
    # columns and more, up to 22 below (bench/lowrank_adam.py)
    assert _compare(_train(cols=most), exact=False, hidden=hidden) == (3, 3)
    assert _compare(_train(cols=most + 1), exact=False, hidden=hidden) == (0, 0)


def test_intel_rules_engine_and_clipping(lowrank_intel):
    assert _compare(_train(autobatch=True, per_state=True), exact=False) == (3, 3)
    # clipping reads every gradient: the products are computed before the step
    held, fused = _compare(_train(clip=1.0), exact=False)
    assert held == 3 and fused == 0


def test_intel_rules_small_c_is_not_held_back(lowrank_intel):
    # a C of fewer than 1,024 rows: not a shape the fused step takes
    assert _compare(_train(), m=1000, exact=False) == (0, 0)
