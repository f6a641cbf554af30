"""Prediction ensembles: average the outputs of several models.

The members are models of one architecture trained differently (saved
checkpoints of a run, runs with different seeds). Their predictions (say
softmax probabilities) are averaged in one computation graph, so an
autobatching graph runs the members' identical operations as batches.

Example:
    def build(pc):                  # makes a model's parameters in pc
        return Tagger(pc, ...)
    ens = training.Ensemble.from_files(build, ckpt.last(3), lambda m, x: m.probs(x))
    probs = ens.predict(sentence)   # numpy, the mean of the 3 models' probabilities
"""

from __future__ import annotations

import dyn.graph as _graph_api
from dyn import _config
from dyn.ops._registry import REGISTRY


class Ensemble:
    """Several models whose predictions are averaged.

    Args:
        members: the models (any objects ``predict`` understands).
        predict: ``predict(member, x) -> Expression`` of one member's
            prediction for input x (probabilities, not log-probabilities, for
            the usual "average of distributions").
    """

    def __init__(self, members, predict):
        self.members = list(members)
        if not self.members:
            raise ValueError("Ensemble: no members")
        self.predict_one = predict

    def expression(self, x):
        """The mean of the members' predictions as an Expression of the current graph."""
        outs = [self.predict_one(m, x) for m in self.members]
        dims = {o.dim() for o in outs}
        if len(dims) != 1:
            raise ValueError("Ensemble: the members' predictions differ in dim: %s" % sorted(dims))
        return REGISTRY["average"].fn(outs)

    def predict(self, x, renew=True):
        """The averaged prediction as a numpy array (in a fresh graph unless renew=False)."""
        if renew:
            _graph_api.renew_cg()
        return self.expression(x).npvalue()

    @classmethod
    def from_files(cls, build, paths, predict):
        """Members loaded from saved collections: for each file a new
        ParameterCollection, ``build(pc)`` makes the model in it, then the file's
        values are loaded (``pc.populate``: names/dims checked)."""
        from dyn.params import ParameterCollection

        members = []
        for path in paths:
            pc = ParameterCollection()
            member = build(pc)
            pc.populate(path)
            members.append(member)
        return cls(members, predict)

    @classmethod
    def from_seeds(cls, train, seeds, predict):
        """Members trained from different seeds: for each seed the random state
        is reset (``dyn.reset_random_seed``) and ``train(seed)`` returns a
        trained model."""
        members = []
        for seed in seeds:
            _config.set_seed(int(seed))
            members.append(train(seed))
        return cls(members, predict)

    def __len__(self):
        return len(self.members)
