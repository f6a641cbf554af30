"""The training tricks as a small, composable toolkit.

- ``train_epoch`` / ``fit``: the loop (fresh graph per minibatch, tqdm progress
  bar with loss and examples/s) that runs the pieces below after each epoch.
- gradient-norm history: ``trainer.grad_norm_history()``, ``plot_grad_norms``
  (next to the clipping threshold), ``suggest_clip_threshold``.
- loss normalisation: ``per_length``, ``per_batch``, ``mean``.
- ``EarlyStopping`` on a dev metric with patience; restores the best
  parameters exactly (``Snapshot``).
- ``ReduceLROnPlateau``: learning-rate decay when the dev metric is flat.
- ``Checkpoints`` / ``average_checkpoints``: keep the last k saved checkpoints
  and average their parameters.
- ``Ensemble``: average the predictions of models loaded from files or trained
  from different seeds.

Everything saves through ``ParameterCollection.save`` (safetensors, atomic).
See docs/training_tricks.md.
"""

from dyn.training._checkpoints import Checkpoints, average_checkpoints, read_checkpoint
from dyn.training._early import EarlyStopping, Snapshot
from dyn.training._ensemble import Ensemble
from dyn.training._history import clipped_fraction, plot_grad_norms, suggest_clip_threshold
from dyn.training._loop import fit, minibatches, train_epoch
from dyn.training._normalise import mean, per_batch, per_length
from dyn.training._plateau import ReduceLROnPlateau

__all__ = [
    "Checkpoints",
    "EarlyStopping",
    "Ensemble",
    "ReduceLROnPlateau",
    "Snapshot",
    "average_checkpoints",
    "clipped_fraction",
    "fit",
    "mean",
    "minibatches",
    "per_batch",
    "per_length",
    "plot_grad_norms",
    "read_checkpoint",
    "suggest_clip_threshold",
    "train_epoch",
]
