"""Trainer state: dyn.io.save_trainer / load_trainer, so a run resumes exactly."""

import numpy as np
import pytest

import dyn as dy
from dyn import io
from dyn.io import ModelFileError, _safetensors

HAVE_STATE = hasattr(dy.Trainer, "state_dict") and hasattr(dy.Trainer, "load_state_dict")
needs_state = pytest.mark.skipif(
    not HAVE_STATE, reason="Trainer.state_dict()/load_state_dict() are not in dyn/trainers.py yet"
)


class FakeTrainer:
    """Only the state_dict protocol, to test the file side on its own."""

    def __init__(self):
        self.state = {"t": np.array(3, np.int64), "m": np.arange(6, dtype=np.float32).reshape(2, 3)}

    def state_dict(self):
        return dict(self.state, lr=0.5)  # a plain float is stored as a 0-d array

    def load_state_dict(self, d):
        self.state = d


def test_trainer_file_round_trip_and_checks(tmp_path):
    a = FakeTrainer()
    io.save_trainer(tmp_path / "t.st", a)
    b = FakeTrainer()
    b.state = None
    io.load_trainer(tmp_path / "t.st", b)
    assert set(b.state) == {"t", "m", "lr"}
    assert b.state["t"].dtype == np.int64 and b.state["t"].shape == () and int(b.state["t"]) == 3
    np.testing.assert_array_equal(b.state["m"], a.state["m"])
    assert float(b.state["lr"]) == 0.5

    class OtherTrainer(FakeTrainer):
        pass

    with pytest.raises(ModelFileError, match="holds the state of a FakeTrainer, not of a OtherTrainer"):
        io.load_trainer(tmp_path / "t.st", OtherTrainer())
    m = dy.ParameterCollection()
    m.add_parameters(2)
    m.save(tmp_path / "model.st")
    with pytest.raises(ModelFileError, match="not a trainer state file"):
        io.load_trainer(tmp_path / "model.st", FakeTrainer())
    with pytest.raises(TypeError, match="has no state_dict"):
        io.save_trainer(tmp_path / "x.st", object())
    with pytest.raises(TypeError, match="has no load_state_dict"):
        io.load_trainer(tmp_path / "t.st", object())
    _safetensors.SafeTensorsFile(tmp_path / "t.st")  # an ordinary safetensors file


def _model(seed):
    """Positive values: EGTrainer treats each parameter (row) as a distribution."""
    rng = np.random.RandomState(seed)
    m = dy.ParameterCollection()
    W = m.add_parameters((4, 3), init=rng.rand(4, 3) + 0.1)
    b = m.add_parameters(4, init=rng.rand(4) + 0.1)
    E = m.add_lookup_parameters((6, 3), init=rng.rand(6, 3) + 0.1)
    return m, [W, b, E]


def _steps(trainer, ps, start, stop):
    W, b, E = ps
    rng = np.random.RandomState(1234)
    data = [(rng.randint(6), rng.randn(4)) for _ in range(stop)]
    for word, target in data[start:stop]:
        dy.renew_cg()
        loss = dy.squared_norm(dy.tanh(W * E[word] + b) - dy.inputVector(list(target)))
        loss.backward()
        trainer.update()


# every trainer dyn has (default settings; lookup tables are updated sparsely, so
# trainers that move idle rows lazily must save and restore that bookkeeping too)
TRAINERS = [
    "SimpleSGDTrainer", "CyclicalSGDTrainer", "MomentumSGDTrainer", "AdagradTrainer", "AdadeltaTrainer",
    "RMSPropTrainer", "AdamTrainer", "AmsgradTrainer", "EGTrainer", "SMORMS3Trainer",
]  # fmt: skip


@needs_state
@pytest.mark.parametrize("name", TRAINERS)
def test_a_run_resumes_exactly(tmp_path, name):
    if not hasattr(dy, name):
        pytest.skip("dyn has no %s yet" % name)
    m, ps = _model(0)
    trainer = getattr(dy, name)(m)
    _steps(trainer, ps, 0, 3)
    m.save(tmp_path / "model.st")
    io.save_trainer(tmp_path / "trainer.st", trainer)
    _steps(trainer, ps, 3, 7)  # the uninterrupted run

    m2, ps2 = _model(1)
    trainer2 = getattr(dy, name)(m2)
    m2.populate(tmp_path / "model.st")
    io.load_trainer(tmp_path / "trainer.st", trainer2)
    _steps(trainer2, ps2, 3, 7)  # the resumed run
    for p, q in zip(ps, ps2):
        np.testing.assert_array_equal(q.as_array(), p.as_array())
