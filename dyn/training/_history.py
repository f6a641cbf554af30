"""The gradient-norm history of a trainer, and a plot of it against the
clipping threshold (to pick a threshold from what the gradients do).

Every trainer records the global gradient norm of each update while clipping
is on (clipping computes it anyway); ``trainer.set_grad_norm_history(True)``
records it without clipping too.

Example:
    fig = training.plot_grad_norms(trainer)      # a matplotlib Figure
    thr = training.suggest_clip_threshold(trainer.grad_norm_history())
"""

from __future__ import annotations

import numpy as np


def _norms_and_threshold(source, threshold):
    if hasattr(source, "grad_norm_history"):
        norms = source.grad_norm_history()
        if threshold is None and source.clipping_enabled:
            threshold = source.clip_threshold
    else:
        norms = np.asarray(source, dtype=np.float64).ravel()
    return norms, threshold


def suggest_clip_threshold(norms, quantile=0.9):
    """A clipping threshold from recorded norms: their `quantile` (by default
    90% of updates pass unclipped, the largest 10% are scaled down)."""
    norms = np.asarray(norms, dtype=np.float64)
    norms = norms[np.isfinite(norms)]
    if norms.size == 0:
        raise ValueError("suggest_clip_threshold: no finite gradient norms recorded")
    if not 0.0 < quantile <= 1.0:
        raise ValueError("suggest_clip_threshold: quantile must be in (0, 1], got %r" % (quantile,))
    return float(np.quantile(norms, quantile))


def clipped_fraction(norms, threshold):
    """The fraction of updates whose norm exceeds threshold (those clipping scales)."""
    norms = np.asarray(norms, dtype=np.float64)
    return float(np.mean(norms > threshold)) if norms.size else 0.0


def plot_grad_norms(source, threshold=None, ax=None, window=25, log=True):
    """Plot gradient norms per update with the clipping threshold.

    Args:
        source: a trainer (its grad_norm_history() and clip threshold) or an
            array of norms.
        threshold: the line to draw (default: the trainer's clip threshold when
            clipping is on; none for an array).
        ax: a matplotlib Axes to draw into (default: a new Figure).
        window: also draw the running median over this many updates (0: no).
        log: logarithmic y axis (norms span orders of magnitude early on).

    Returns:
        The matplotlib Figure (a notebook shows it as an image).
    """
    norms, threshold = _norms_and_threshold(source, threshold)
    if ax is None:
        from matplotlib.figure import Figure  # not pyplot: the Figure shows once, where it is returned

        fig = Figure(figsize=(7, 3.2), dpi=100)
        ax = fig.add_subplot(1, 1, 1)
    else:
        fig = ax.figure
    steps = np.arange(1, len(norms) + 1)
    ax.plot(steps, norms, lw=0.8, alpha=0.6, label="gradient norm")
    if window and len(norms) >= window:
        med = np.array([np.median(norms[max(0, i - window + 1) : i + 1]) for i in range(len(norms))])
        ax.plot(steps, med, lw=1.6, label="running median (%d)" % window)
    if threshold is not None:
        frac = clipped_fraction(norms, threshold)
        ax.axhline(
            threshold,
            color="red",
            ls="--",
            label="clip threshold %.3g (%.0f%% clipped)" % (threshold, 100 * frac),
        )
    if log and len(norms) and np.all(norms[np.isfinite(norms)] > 0):
        ax.set_yscale("log")
    ax.set_xlabel("update")
    ax.set_ylabel("global gradient norm")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    return fig
