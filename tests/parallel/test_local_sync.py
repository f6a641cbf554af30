"""Synchronous workers: N processes on batches of B end with the parameters of
one process on batches of N*B, for every trainer with state, sparse (exact
catch-up) and dense lookup updates."""

import numpy as np
import pytest

import dyn as dy
import dyn.parallel as par
from tests.parallel._helpers import TRAINERS, Model, child_pids, make_data, shm_entries

# float32: the workers sum their gradients in another order than one process, and
# Adam divides by sqrt(v); differences seen are ~3e-7, checked with margin
RTOL, ATOL = 2e-5, 2e-6


def _train(workers, batch, make_trainer, sparse, data, epochs=2, **kw):
    model = Model()
    trainer = make_trainer(model.m)
    trainer.set_sparse_updates(sparse)
    result = par.train(
        model.loss,
        data,
        trainer,
        workers=workers,
        mode="sync",
        batch_size=batch,
        epochs=epochs,
        progress=False,
        **kw,
    )
    return model, trainer, result


@pytest.mark.parametrize("sparse", [True, False], ids=["sparse", "dense"])
@pytest.mark.parametrize("name", sorted(TRAINERS))
def test_two_workers_equal_one_process_on_the_combined_batch(name, sparse):
    data = make_data(90, seed=5)  # 90 = 7 full global batches of 12 and a last one of 6
    ref, _, r1 = _train(1, 12, TRAINERS[name], sparse, data)
    got, _, r2 = _train(2, 6, TRAINERS[name], sparse, data)
    want = ref.params()
    moved = max(np.abs(want[k] - Model().params()[k]).max() for k in want)
    assert moved > 1e-2  # training did something
    for k, v in got.params().items():
        np.testing.assert_allclose(v, want[k], rtol=RTOL, atol=ATOL, err_msg=k)
    assert (r2.steps, r2.examples) == (r1.steps, r1.examples) == (16, 180)
    assert r2.loss == pytest.approx(r1.loss, rel=1e-5)


def test_three_workers_and_an_uneven_last_batch_with_weight_decay():
    data = make_data(50, seed=6)  # global batches of 12, the last of 2: one worker gets nothing

    def adam_decay(m):
        m.set_weight_decay(1e-3)
        return dy.AdamTrainer(m, 0.01)

    ref, _, _ = _train(1, 12, adam_decay, True, data)
    got, _, _ = _train(3, 4, adam_decay, True, data)
    want = ref.params()
    for k, v in got.params().items():
        np.testing.assert_allclose(v, want[k], rtol=RTOL, atol=ATOL, err_msg=k)


def test_sync_result_dev_history_save_and_nothing_left(tmp_path):
    shm, path = shm_entries(), str(tmp_path / "model.safetensors")
    data = make_data(60, seed=7)
    model = Model()
    trainer = dy.SimpleSGDTrainer(model.m, 0.05)
    calls = []

    def dev():
        calls.append(1)
        return {"loss": model.loss(data[:20]).value() / 20}

    result = par.train(
        model.loss,
        data,
        trainer,
        workers=2,
        mode="sync",
        batch_size=5,
        epochs=3,
        dev=dev,
        save=path,
        progress=False,
    )
    assert len(calls) == 3 and [d["epoch"] for d in result.dev] == [0, 1, 2]
    assert result.dev[-1]["loss"] < result.dev[0]["loss"]
    assert result.workers == 2 and result.mode == "sync" and result.units == result.examples == 180
    saved = Model(seed=9)
    saved.m.populate(path)
    for k, v in saved.params().items():
        np.testing.assert_array_equal(v, model.params()[k], err_msg=k)
    assert child_pids() == [] and shm_entries() == shm


def test_trainer_goes_on_after_a_parallel_run():
    data = make_data(40, seed=8)
    model = Model()
    trainer = dy.AdamTrainer(model.m, 0.01)
    par.train(model.loss, data, trainer, workers=2, mode="sync", batch_size=4, progress=False)
    dy.renew_cg()
    model.loss(data[:4]).backward()
    trainer.update()
    assert all(np.isfinite(v).all() for v in model.params().values())


def test_split_by_cost_evens_the_work_and_keeps_every_example_once():
    from dyn.parallel._sync import split_batch

    costs = np.array([9.0, 1, 1, 1, 8, 2, 2, 3, 7, 1, 1, 4])
    batch = np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])
    parts = split_batch(batch, 3, costs)
    assert sorted(np.concatenate(parts).tolist()) == batch.tolist()
    assert [costs[p].sum() for p in parts] == [14.0, 13.0, 13.0]  # by count: 19, 15 and 6
    assert [p.tolist() for p in split_batch(batch, 3)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]


def test_workers_split_by_cost_train_like_one_process():
    data = make_data(90, seed=5)
    ref, _, r1 = _train(1, 12, TRAINERS["adam"], True, data)
    got, _, r2 = _train(2, 6, TRAINERS["adam"], True, data, cost=lambda ex: len(ex[0]))
    want = ref.params()
    for k, v in got.params().items():
        np.testing.assert_allclose(v, want[k], rtol=RTOL, atol=ATOL, err_msg=k)
    assert (r2.steps, r2.examples) == (r1.steps, r1.examples)


def test_a_bad_cost_is_named():
    with pytest.raises(ValueError, match="example 3 gave -1.0"):
        _train(2, 6, TRAINERS["sgd"], True, DATA20, cost=lambda ex: -1.0 if ex is DATA20[3] else 1.0)
    with pytest.raises(TypeError, match="cost must be a function"):
        _train(2, 6, TRAINERS["sgd"], True, DATA20, cost=3)
    assert child_pids() == []


DATA20 = make_data(20)
