"""Saving and loading: parameters, collections, builders and trainer state.

Model files are safetensors (dyn/io/_safetensors.py): loading one runs no code.
Each (lookup) parameter is one tensor named by its full DyNet name ("/W",
"/lstm/_0") holding exactly what ``as_array()`` returns (shape ``shape()``,
lookup tables (N, d...)), so any safetensors reader sees the natural arrays;
the header's metadata lists the entries in save order (dyn/io/_format.py).

``populate`` also reads DyNet's text format (see
dyn/io/_dynet_text.py), detected from the file's first bytes, so models trained
with DyNet can be brought over; ``dy.load`` also reads DyNet's dy.save files.
Every load validates the whole file and checks names, kinds, dims and counts
before it writes anything; on any problem it raises ModelFileError (a
ValueError and a RuntimeError) naming the file and what is wrong. Every save
is atomic: a crash leaves the previous file whole.

The package, one file per job:

    _format.py       the model file: tensor names and layout, header metadata,
                     reading (validated entries) and writing
    _collections.py  ParameterCollection/Parameters save, populate, load_param
    _objects.py      dy.save / dy.load and register_savable
    _trainer.py      save_trainer / load_trainer
    _safetensors.py  the safetensors reader/writer, atomic saves
    _dynet_text.py   DyNet's text model format
    _dynet_meta.py   DyNet's pickled dy.save .meta, read as data

It imports nothing of dyn.params: dyn.params imports it, and hands dy.save /
dy.load its classes (_objects.use_parameter_classes).

Example:
    m = dy.ParameterCollection()
    W = m.add_parameters((3, 4), name="W")
    m.save("model.st")
    m.populate("model.st")              # same values back
    dy.save("run", [W, lstm])           # run.data (+ run.meta, a readable copy)
    W2, lstm2 = dy.load("run", dy.ParameterCollection())
"""

from dyn.io._objects import load, load_generator, register_savable, save
from dyn.io._safetensors import ModelFileError
from dyn.io._trainer import load_trainer, save_trainer

__all__ = [
    "ModelFileError", "save", "load", "load_generator", "register_savable",
    "save_trainer", "load_trainer",
]  # fmt: skip
