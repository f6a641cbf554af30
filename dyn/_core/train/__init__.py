"""Optimizer kernels: the update rules over the parameter pool and the exact catch-up of lazily
updated lookup rows."""
