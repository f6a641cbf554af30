"""Operation families: every module here declares its operations with
``dyn.ops._registry.op``; importing this package imports them all (a new
family is a new file, nothing else to edit)."""

import importlib
import pkgutil

for _info in pkgutil.iter_modules(__path__):
    if not _info.name.startswith("_"):
        importlib.import_module(__name__ + "." + _info.name)
