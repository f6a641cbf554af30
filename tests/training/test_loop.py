"""The loop helper, loss normalisation and the gradient-norm history."""

import math

import numpy as np
import pytest

import dyn as dy
from dyn import training

from ._model import Model, make_data


def test_fit_learns_with_every_trick(tmp_path):
    dy.reset_random_seed(3)
    pc = dy.ParameterCollection()
    model = Model(pc)
    trainer = dy.AdamTrainer(pc, 0.05)
    train, dev = make_data(200, seed=1), make_data(60, seed=2)
    stopper = training.EarlyStopping(pc, patience=2)
    plateau = training.ReduceLROnPlateau(trainer, patience=0)
    ckpt = training.Checkpoints(pc, tmp_path, keep=2)
    log = training.fit(
        trainer,
        train,
        model.loss,
        epochs=6,
        batch_size=8,
        dev_metric=lambda: model.accuracy(dev),
        early_stopping=stopper,
        plateau=plateau,
        checkpoints=ckpt,
        progress=False,
    )
    assert log[-1]["loss"] < log[0]["loss"]
    assert stopper.best > 0.7  # 3 classes, 10% noise
    assert model.accuracy(dev) == stopper.best  # the best parameters are back
    assert len(ckpt.paths) == 2 and all(r["examples_per_s"] > 0 for r in log)
    assert len(trainer.grad_norm_history()) == trainer.updates == sum(math.ceil(200 / 8) for _ in log)


def test_train_epoch_progress_bar_and_bad_loss(capsys):
    pc = dy.ParameterCollection()
    model = Model(pc)
    trainer = dy.SimpleSGDTrainer(pc, 0.1)
    r = training.train_epoch(trainer, make_data(10), model.loss, batch_size=4, progress=True)
    assert r["examples"] == 10 and r["updates"] == 3
    assert "10/10" in capsys.readouterr().err
    with pytest.raises(FloatingPointError, match="loss is"):
        training.train_epoch(trainer, make_data(2), lambda b: dy.log(dy.scalarInput(-1.0)), progress=False)


def test_normalisation_scales_the_gradient():
    pc = dy.ParameterCollection()
    W = pc.add_parameters((2,), init=1.0)
    dy.renew_cg()
    training.per_length(dy.sum_elems(W * 3.0), 3).backward()
    np.testing.assert_allclose(W.grad_as_array(), [1.0, 1.0])
    W.zero()
    dy.renew_cg()
    x = dy.inputTensor(np.ones((2, 4)), batched=True)  # batch of 4
    loss = training.per_batch(dy.dot_product(W + 1.0, x))
    assert loss.dim() == ((1,), 1)
    loss.backward()
    np.testing.assert_allclose(W.grad_as_array(), [1.0, 1.0])
    assert training.mean([dy.scalarInput(1.0), dy.scalarInput(3.0)]).value() == 2.0
    with pytest.raises(ValueError, match="per_length"):
        training.per_length(loss, 0)
    with pytest.raises(ValueError, match="needs batch_size"):
        training.per_batch(dy.scalarInput(1.0))
    with pytest.raises(ValueError, match="batch 4"):
        training.per_batch(dy.dot_product(W, x), 3)


def test_grad_norm_history_records_the_norm_clipping_uses():
    pc = dy.ParameterCollection()
    W = pc.add_parameters((3,), init=0.0)
    t = dy.SimpleSGDTrainer(pc, 0.1)
    t.set_clip_threshold(1.0)
    for scale in (1.0, 2.0, 0.1):
        dy.renew_cg()
        dy.dot_product(W, dy.inputVector([scale, 2 * scale, 2 * scale])).backward()
        t.update()
    np.testing.assert_allclose(t.grad_norm_history(), [3.0, 6.0, 0.3], rtol=1e-6)
    assert t.clips == 2 and training.clipped_fraction(t.grad_norm_history(), 1.0) == pytest.approx(2 / 3)
    t.set_clip_threshold(0)  # no clipping: no norm computed unless asked
    dy.renew_cg()
    dy.dot_product(W, dy.inputVector([1.0, 0, 0])).backward()
    t.update()
    assert len(t.grad_norm_history()) == 3
    t.set_grad_norm_history(True)
    dy.renew_cg()
    dy.dot_product(W, dy.inputVector([0.0, 4.0, 0])).backward()
    t.update()
    assert t.grad_norm_history()[-1] == pytest.approx(4.0)
    t.set_grad_norm_history(False)
    t.set_clip_threshold(5)
    dy.renew_cg()
    dy.dot_product(W, dy.inputVector([1.0, 0, 0])).backward()
    t.update()
    assert len(t.grad_norm_history()) == 4
    assert training.suggest_clip_threshold([1, 2, 3, 4, 100], 0.8) == pytest.approx(23.2)


def test_plot_grad_norms_draws_norms_and_threshold():
    pytest.importorskip("matplotlib")
    fig = training.plot_grad_norms(np.linspace(1, 10, 50), threshold=5.0)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0] == "gradient norm" and any(
        "clip threshold 5" in s and "56% clipped" in s for s in labels
    )
    assert ax.get_yscale() == "log"
