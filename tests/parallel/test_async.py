"""Asynchronous (Hogwild) workers: shared parameters and trainer state, lock-free."""

import os

import numpy as np
import pytest
from dyn._core.core.expr import pool_for_current_dtype

import dyn as dy
import dyn.parallel as par
from tests.parallel._helpers import Model, child_pids, make_data, shm_entries


def _mean_loss(model, data):
    dy.renew_cg()
    return model.loss(data).value() / len(data)


@pytest.mark.parametrize(
    "make_trainer",
    [lambda m: dy.SimpleSGDTrainer(m, 0.05), lambda m: dy.AdamTrainer(m, 0.01)],
    ids=["sgd", "adam"],
)
def test_async_loss_decreases_and_result_is_finite(make_trainer):
    shm = shm_entries()
    data = make_data(300, seed=11)
    model = Model()
    before = _mean_loss(model, data)
    trainer = make_trainer(model.m)
    result = par.train(
        model.loss,
        data,
        trainer,
        workers=2,
        mode="async",
        batch_size=4,
        epochs=3,
        progress=False,
        dev=lambda: {"loss": _mean_loss(model, data)},
    )
    after = _mean_loss(model, data)
    assert all(np.isfinite(v).all() for v in model.params().values())
    assert after < before - 0.05
    assert result.examples == 900 and result.steps == 2 * 3 * 38  # 150 examples per worker per epoch
    assert [d["epoch"] for d in result.dev] == [0, 1, 2] and result.dev[-1]["loss"] == pytest.approx(after)
    assert child_pids() == [] and shm_entries() == shm


def test_async_workers_share_the_parameters():
    """Every worker's updates reach the shared pool: with SGD and the parent's
    examples contributing nothing, the parameters still move."""
    data = make_data(40, seed=12)
    model = Model()
    parent = os.getpid()

    def loss(batch):
        value = model.loss(batch)
        return value * (0.0 if os.getpid() == parent else 1.0)

    w0 = model.W1.as_array().copy()
    par.train(
        loss, data, dy.SimpleSGDTrainer(model.m, 0.1), workers=2, mode="async", batch_size=2, progress=False
    )
    assert np.abs(model.W1.as_array() - w0).max() > 1e-3
    # back in private memory: a new parameter may be added and trained
    model.m.add_parameters((2, 2))


def test_async_rejects_parameters_created_during_training():
    data = make_data(20, seed=13)
    model = Model()

    def loss(batch):
        # one element more than the pool has room for: it grows out of shared memory (however
        # much room the tests before this one left)
        pool = pool_for_current_dtype()
        model.m.add_parameters((len(pool.values) - pool.used + 1,))
        return model.loss(batch)

    with pytest.raises(RuntimeError, match="parameters were created during training"):
        par.train(loss, data, dy.SimpleSGDTrainer(model.m), workers=2, mode="async", progress=False)
    assert child_pids() == []


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_workers_share_the_cores_out_for_blas(mode, tmp_path):
    """Every worker runs BLAS with its share of the cores (n workers each running a full-size
    OpenBLAS pool oversubscribe the machine); this process's setting comes back afterwards."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from dyn.parallel._sync import blas_threads

    def blas():
        return sorted({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})

    before = blas()
    model = Model()

    def loss(batch):
        with open(tmp_path / ("%d.txt" % os.getpid()), "w") as f:
            f.write(" ".join(map(str, blas())))
        return model.loss(batch)

    with threadpool_limits(limits=4, user_api="blas"):  # more than a worker's share (CI sets 1 by env)
        assert blas() == [4]
        par.train(
            loss,
            make_data(16),
            dy.SimpleSGDTrainer(model.m),
            workers=3,
            mode=mode,
            batch_size=2,
            progress=False,
        )
        assert blas() == [4]
    assert blas() == before
    seen = {p.name: p.read_text() for p in tmp_path.iterdir()}
    assert len(seen) == 3 and set(seen.values()) == {str(blas_threads(3))}, seen
    assert blas_threads(1) == len(os.sched_getaffinity(0)) and blas_threads(10**6) == 1
