"""sync_gradients and broadcast_parameters on ranks that are threads of this
process: the merged gradients equal the gradient of the combined batch."""

import numpy as np
import pytest

import dyn as dy
from dyn.parallel import SingleProcess, broadcast_parameters, sync_gradients
from tests.parallel._helpers import Model, ThreadExchange, make_data, run_ranks

RTOL, ATOL = 1e-5, 1e-6  # float32: the ranks sum their parts in another order than one process


def _grads(model):
    return {
        name: p.grad_as_array().copy()
        for name, p in (("E", model.E), ("W1", model.W1), ("b1", model.b1), ("W2", model.W2))
    }


def _backward(model, batch, whole=False):
    dy.renew_cg()
    (model.whole_table_loss if whole else model.loss)(batch).backward()


@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("average", [False, True])
def test_merged_gradients_equal_the_combined_batch(size, average):
    data = make_data(4 * size, seed=3)
    ref = Model()
    _backward(ref, data)
    want = _grads(ref)
    want_rows = set(ref.E.touched_rows().tolist())
    replicas = [Model() for _ in range(size)]
    parts = np.array_split(np.arange(len(data)), size)
    for model, part in zip(replicas, parts):
        _backward(model, [data[i] for i in part])
    run_ranks(lambda ex: sync_gradients(replicas[ex.rank].m, ex, average), ThreadExchange.group(size))
    for model in replicas:
        got = _grads(model)
        for name in want:
            scale = 1.0 / size if average else 1.0
            np.testing.assert_allclose(got[name], want[name] * scale, rtol=RTOL, atol=ATOL, err_msg=name)
        rows = model.E.touched_rows().tolist()
        assert len(rows) == len(set(rows)) and set(rows) == want_rows
        assert not model.E.touched_all()


def test_table_used_whole_on_one_rank_is_whole_everywhere():
    data = make_data(6, seed=4)
    ref = Model()
    dy.renew_cg()
    (ref.whole_table_loss(data[:3]) + ref.loss(data[3:])).backward()
    want = _grads(ref)
    replicas = [Model(), Model()]
    _backward(replicas[0], data[:3], whole=True)
    _backward(replicas[1], data[3:])
    run_ranks(lambda ex: sync_gradients(replicas[ex.rank].m, ex, False), ThreadExchange.group(2))
    for model in replicas:
        assert model.E.touched_all()
        for name, g in _grads(model).items():
            np.testing.assert_allclose(g, want[name], rtol=RTOL, atol=ATOL, err_msg=name)


def test_single_process_is_the_identity():
    model = Model()
    _backward(model, make_data(3))
    before = _grads(model)
    rows = model.E.touched_rows()
    sync_gradients(model.m, SingleProcess(), average=True)
    for name, g in _grads(model).items():
        np.testing.assert_array_equal(g, before[name])
    np.testing.assert_array_equal(model.E.touched_rows(), rows)


def test_dense_gradients_are_reduced_in_few_calls():
    calls = []

    class Counting(SingleProcess):
        size = 2

        def allreduce_sum(self, buf):
            calls.append(len(buf))

        def allgather_rows(self, idx, rows):
            return np.asarray(idx, np.int64), np.asarray(rows)

    model = Model()
    _backward(model, make_data(2))
    sync_gradients(model.m, Counting(), average=False)
    # E is created first, then W1, b1, W2 one after another: one run of dense parameters
    assert len(calls) == 1
    assert calls[0] >= model.W1.size + model.b1.size + model.W2.size


def test_broadcast_parameters_makes_every_rank_equal_to_root():
    replicas = [Model(seed=1), Model(seed=2), Model(seed=3)]
    trainers = [dy.AdamTrainer(r.m, 0.01) for r in replicas]
    for r, t in zip(replicas, trainers):  # different trainer states on every rank
        _backward(r, make_data(3, seed=r.W1.as_array().size + id(r) % 7))
        t.update()
    want = replicas[1].params()
    want_m = trainers[1]._state(replicas[1].W1).arrays[0].copy()
    run_ranks(
        lambda ex: broadcast_parameters(replicas[ex.rank].m, ex, root=1, trainer=trainers[ex.rank]),
        ThreadExchange.group(3),
    )
    for r, t in zip(replicas, trainers):
        for name, v in r.params().items():
            np.testing.assert_array_equal(v, want[name], err_msg=name)
        np.testing.assert_array_equal(t._state(r.W1).arrays[0], want_m)
        assert t.updates == 1
