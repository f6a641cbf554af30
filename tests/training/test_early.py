"""Early stopping restores the best dev parameters exactly, lookup tables included."""

import numpy as np
import pytest

import dyn as dy
from dyn import training

from ._model import Model, make_data, values


def _train_steps(model, trainer, data, k):
    for i in range(k):
        dy.renew_cg()
        model.loss(data[i % len(data) : i % len(data) + 2]).backward()
        trainer.update()


@pytest.mark.parametrize("trainer_cls", [dy.AdamTrainer, dy.MomentumSGDTrainer])
def test_restore_is_bit_exact_with_lazy_sparse_rows(trainer_cls):
    pc = dy.ParameterCollection()
    pc.set_weight_decay(1e-3)  # idle rows decay lazily too
    model = Model(pc)
    trainer = trainer_cls(pc)
    data = make_data(40)
    stopper = training.EarlyStopping(pc, patience=1, mode="max")
    metrics = [0.5, 0.7, 0.6, 0.65]  # best at step 1
    expected = None
    for k, metric in enumerate(metrics):
        # a few words only: most rows of E stay idle and are caught up lazily
        _train_steps(model, trainer, data[:3], 5)
        if k == 1:
            expected = values(pc)  # as_array reads through the catch-up: the dense values
        stop = stopper.step(metric)
    assert stop and stopper.best_step == 1 and stopper.best == 0.7
    assert any(not np.array_equal(values(pc)[n], expected[n]) for n in expected)
    stopper.restore()
    got = values(pc)
    for name in expected:
        assert np.array_equal(got[name], expected[name]), name
    # reading again goes through the catch-up once more: nothing was left pending
    assert all(np.array_equal(values(pc)[n], expected[n]) for n in expected)


def test_restore_trainer_state_and_saved_file(tmp_path):
    pc = dy.ParameterCollection()
    model = Model(pc)
    trainer = dy.AdamTrainer(pc, 0.01)
    data = make_data(20)
    path = tmp_path / "best.safetensors"
    stopper = training.EarlyStopping(pc, patience=0, trainer=trainer, restore_trainer=True, path=path)
    _train_steps(model, trainer, data, 3)
    stopper.step(1.0)
    state = trainer.state_dict()
    best = values(pc)
    trainer.learning_rate = 0.5
    _train_steps(model, trainer, data, 3)
    assert stopper.step(0.5)
    stopper.restore()
    after = trainer.state_dict()
    assert set(after) == set(state)
    for k in state:
        assert np.array_equal(after[k], state[k]), k
    assert trainer.learning_rate == 0.01
    loaded = dy.ParameterCollection()
    Model(loaded)
    loaded.populate(str(path))
    for name, v in values(loaded).items():
        assert np.array_equal(v, best[name])


def test_modes_patience_and_errors():
    pc = dy.ParameterCollection()
    Model(pc)
    s = training.EarlyStopping(pc, patience=2, mode="min", min_delta=0.1)
    assert [s.step(x) for x in (1.0, 0.95, 0.5, 0.45, 0.44, 0.43)] == [
        False,
        False,
        False,
        False,
        False,
        True,
    ]
    assert s.best == 0.5 and s.best_step == 2
    with pytest.raises(ValueError, match="mode"):
        training.EarlyStopping(pc, mode="up")
    with pytest.raises(ValueError, match="NaN"):
        s.step(float("nan"))
    with pytest.raises(RuntimeError, match="no evaluation"):
        training.EarlyStopping(pc).restore()
    with pytest.raises(ValueError, match="needs the trainer"):
        training.EarlyStopping(pc, restore_trainer=True)


def test_plateau_halves_after_patience_and_respects_min_lr():
    pc = dy.ParameterCollection()
    Model(pc)
    t = dy.SimpleSGDTrainer(pc, 0.4)
    p = training.ReduceLROnPlateau(t, factor=0.5, patience=1, min_lr=0.15)
    out = [p.step(x) for x in (0.5, 0.6, 0.6, 0.6, 0.7, 0.7, 0.7, 0.7, 0.7)]
    assert out == [False, False, False, True, False, False, True, False, False]
    assert t.learning_rate == 0.15 and p.reductions == [3, 6]
    assert p.history[:4] == [0.4, 0.4, 0.4, 0.2]
    with pytest.raises(ValueError, match="factor"):
        training.ReduceLROnPlateau(t, factor=1.5)
