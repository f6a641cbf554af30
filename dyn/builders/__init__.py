"""Builders: recurrent, tree-structured and softmax layers (DyNet's API).

Every module here lists its public names in ``__all__``; they are collected
here and exported as ``dyn.<name>`` (a new builder module needs no other edit).
"""

import importlib
import pkgutil

__all__ = []
for _info in pkgutil.iter_modules(__path__):
    if not _info.name.startswith("_"):
        _module = importlib.import_module(__name__ + "." + _info.name)
        for _name in getattr(_module, "__all__", ()):
            globals()[_name] = getattr(_module, _name)
            __all__.append(_name)
