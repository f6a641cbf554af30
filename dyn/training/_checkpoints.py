"""Checkpoints and their averages.

Every checkpoint is written by ``ParameterCollection.save`` (safetensors,
atomically: a crash mid-save leaves the previous file intact). Averaging the
parameters of the last k checkpoints of one run often gives a model better than
any one of them (the "checkpoint ensemble" of the training-tricks slides) at the
cost of one model.

Example:
    ckpt = training.Checkpoints(model, "runs/tagger", keep=5)
    for epoch in range(10):
        train_one_epoch()
        ckpt.save(epoch)
    ckpt.average(k=3)          # the model now holds the mean of the last 3
"""

from __future__ import annotations

import os

import numpy as np

from dyn.io import _format
from dyn.io._collections import populate_in_order
from dyn.io._safetensors import ModelFileError


def read_checkpoint(path):
    """The entries of a saved collection, in saved order: [(name, kind, dim, flat values)]."""
    mf = _format.ModelFile(path)
    if mf.format != "dyn":
        raise ModelFileError("%s: not a parameter collection saved by dyn (format %s)" % (path, mf.format))
    return [(e.name, e.kind, e.dim, e.values()) for e in mf.entries]


def average_checkpoints(paths, model=None):
    """The element-wise mean of the parameters saved in several checkpoints.

    The files must hold the same parameters (names, kinds and dims, in the same
    order); the mean is taken in float64 and rounded once to the saved type.

    Args:
        paths: checkpoint files written by ParameterCollection.save.
        model: if given, its parameters are set to the mean (by position, as
            ``populate``; names and dims are checked first, nothing changes on
            a mismatch).

    Returns:
        {name: mean value} with the shapes ``as_array()`` gives.
    """
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise ValueError("average_checkpoints: no checkpoint files given")
    first = read_checkpoint(paths[0])
    sums = [np.asarray(v, dtype=np.float64).copy() for _n, _k, _d, v in first]
    for path in paths[1:]:
        entries = read_checkpoint(path)
        if [(n, k, d) for n, k, d, _v in entries] != [(n, k, d) for n, k, d, _v in first]:
            raise ValueError("average_checkpoints: %s does not hold the parameters of %s" % (path, paths[0]))
        for s, (_n, _k, _d, v) in zip(sums, entries):
            s += v
    dtype = _format.ModelFile(paths[0]).entries[0].dtype if first else np.float32
    means = [(s / len(paths)).astype(dtype) for s in sums]
    if model is not None:
        entries = [
            _format.Entry(n, k, d, dtype, _format.constant(m)) for (n, k, d, _v), m in zip(first, means)
        ]
        populate_in_order(
            model, entries, _format.ModelFile(paths[0]), "the average of %d checkpoints" % len(paths)
        )
    return {n: _format.to_view(m, k, d) for (n, k, d, _v), m in zip(first, means)}


class Checkpoints:
    """Save a collection's parameters every epoch (or step), keep the last `keep`.

    Args:
        model: the ParameterCollection.
        directory: where the files go (created if missing).
        keep: how many recent checkpoints to keep on disk (older ones are
            deleted); None keeps all.
        prefix: file names are ``<prefix>-<tag>.safetensors``.

    Attributes:
        paths: the checkpoint files kept, oldest first.
    """

    def __init__(self, model, directory, keep=5, prefix="ckpt"):
        if keep is not None and keep < 1:
            raise ValueError("Checkpoints: keep must be >= 1 or None, got %r" % (keep,))
        self.model, self.directory, self.keep, self.prefix = model, os.fspath(directory), keep, prefix
        os.makedirs(self.directory, exist_ok=True)
        self.paths = []

    def save(self, tag):
        """Save the parameters now as checkpoint `tag` (an epoch number, a step ...)."""
        path = os.path.join(self.directory, "%s-%s.safetensors" % (self.prefix, tag))
        self.model.save(path)
        if path in self.paths:
            self.paths.remove(path)
        self.paths.append(path)
        while self.keep is not None and len(self.paths) > self.keep:
            os.remove(self.paths.pop(0))
        return path

    def last(self, k=None):
        """The last k checkpoint files (all kept ones by default)."""
        k = len(self.paths) if k is None else k
        if not 1 <= k <= len(self.paths):
            raise ValueError("Checkpoints: asked for the last %r of %d checkpoints" % (k, len(self.paths)))
        return self.paths[-k:]

    def average(self, k=None, model=None):
        """Set `model` (default: the watched one) to the mean of the last k
        checkpoints; returns {name: mean value}."""
        return average_checkpoints(self.last(k), self.model if model is None else model)
