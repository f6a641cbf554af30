"""Checkpoint averaging equals the numpy mean of the saved tensors; ensembles
average their members' predictions."""

import numpy as np
import pytest

import dyn as dy
from dyn import training
from dyn.io import _safetensors

from ._model import Model, make_data, values


def _train(model, trainer, data, steps=4):
    for i in range(steps):
        dy.renew_cg()
        model.loss(data[i : i + 3]).backward()
        trainer.update()


def test_average_of_last_k_is_the_numpy_mean(tmp_path):
    pc = dy.ParameterCollection()
    model = Model(pc)
    trainer = dy.AdamTrainer(pc, 0.05)
    ckpt = training.Checkpoints(pc, tmp_path / "run", keep=3)
    data = make_data(30)
    for epoch in range(5):
        _train(model, trainer, data)
        ckpt.save(epoch)
    assert [p.rsplit("-", 1)[1] for p in ckpt.paths] == ["2.safetensors", "3.safetensors", "4.safetensors"]
    assert len(list((tmp_path / "run").iterdir())) == 3  # older ones deleted
    saved = [_safetensors.read(p)[0] for p in ckpt.last(3)]  # the raw tensors, read independently
    means = ckpt.average(k=3)
    got = values(pc)
    for name in ["/E", "/W", "/b"]:
        want = np.mean(np.stack([s[name].astype(np.float64) for s in saved]), axis=0).astype(np.float32)
        assert np.array_equal(got[name].reshape(want.shape), want), name
        assert np.array_equal(means[name].reshape(want.shape), want), name
    # the mean differs from the last checkpoint (the test would pass trivially otherwise)
    assert not np.array_equal(saved[-1]["/E"], saved[0]["/E"]) and not np.array_equal(
        got["/E"], saved[-1]["/E"]
    )


def test_average_checks_the_files(tmp_path):
    a, b = dy.ParameterCollection(), dy.ParameterCollection()
    Model(a)
    b.add_parameters((2, 2), name="W")
    a.save(str(tmp_path / "a.safetensors"))
    b.save(str(tmp_path / "b.safetensors"))
    with pytest.raises(ValueError, match="does not hold the parameters"):
        training.average_checkpoints([tmp_path / "a.safetensors", tmp_path / "b.safetensors"])
    with pytest.raises(ValueError, match="no checkpoint"):
        training.average_checkpoints([])
    before = values(b)
    with pytest.raises(ValueError, match="nothing loaded"):
        training.average_checkpoints([tmp_path / "a.safetensors"], model=b)
    assert all(np.array_equal(v, before[n]) for n, v in values(b).items())
    ckpt = training.Checkpoints(a, tmp_path / "c", keep=2)
    with pytest.raises(ValueError, match="last 1 of 0"):
        ckpt.average(1)


def test_ensemble_from_files_and_seeds_average_the_members(tmp_path):
    paths, members_probs = [], []
    data = make_data(20)
    for seed in (1, 2, 3):
        dy.reset_random_seed(seed)
        pc = dy.ParameterCollection()
        m = Model(pc)
        _train(m, dy.SimpleSGDTrainer(pc, 0.2), data)
        path = str(tmp_path / ("m%d.safetensors" % seed))
        pc.save(path)
        paths.append(path)
        dy.renew_cg()
        members_probs.append(m.probs(5).npvalue())
    ens = training.Ensemble.from_files(Model, paths, lambda m, w: m.probs(w))
    assert len(ens) == 3
    np.testing.assert_allclose(ens.predict(5), np.mean(members_probs, axis=0), rtol=1e-6)

    def train(seed):
        pc = dy.ParameterCollection()
        return Model(pc)

    by_seed = training.Ensemble.from_seeds(train, [1, 1, 2], lambda m, w: m.probs(w))
    p = [m.probs(0).npvalue() for m in by_seed.members if dy.renew_cg() or True]
    np.testing.assert_array_equal(p[0], p[1])  # same seed, same initial model
    assert not np.array_equal(p[0], p[2])
