"""Trainer state files: save_trainer / load_trainer.

A trainer's ``state_dict()`` (name -> array) is written as a safetensors file
whose metadata says format "dyn-trainer" and the trainer's class name, so it
cannot be loaded into a trainer of another kind. Saves are atomic.
"""

from __future__ import annotations

import os

import numpy as np

from dyn.io import _safetensors as st
from dyn.io._format import FORMAT_VERSION
from dyn.io._safetensors import ModelFileError


def save_trainer(path, trainer):
    """Atomically save a trainer's state (``trainer.state_dict()``: name -> array)."""
    if not callable(getattr(trainer, "state_dict", None)):
        raise TypeError("%s has no state_dict(): its state cannot be saved" % type(trainer).__name__)
    tensors = []
    for k, v in trainer.state_dict().items():
        if not isinstance(k, str):
            raise TypeError("state_dict keys must be str, got %r" % (k,))
        tensors.append((k, np.asarray(v)))
    meta = {"format": "dyn-trainer", "format_version": FORMAT_VERSION, "trainer": type(trainer).__name__}
    st.write(os.fspath(path), tensors, meta)


def load_trainer(path, trainer):
    """Restore a trainer's state saved by save_trainer (``trainer.load_state_dict``);
    values come back as numpy arrays (0-d for scalars)."""
    if not callable(getattr(trainer, "load_state_dict", None)):
        raise TypeError("%s has no load_state_dict(): its state cannot be loaded" % type(trainer).__name__)
    sf = st.SafeTensorsFile(os.fspath(path))
    if sf.metadata.get("format") != "dyn-trainer":
        raise ModelFileError("%s: not a trainer state file (saved with dyn.io.save_trainer)" % sf.path)
    if sf.metadata.get("trainer") != type(trainer).__name__:
        raise ModelFileError(
            "%s: holds the state of a %s, not of a %s"
            % (sf.path, sf.metadata.get("trainer"), type(trainer).__name__)
        )
    trainer.load_state_dict(sf.read_all())
