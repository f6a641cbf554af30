"""Parameters, lookup tables, their collections and initialisers.

All parameters of one float type live in one contiguous pool (values and
gradients, see dyn/_core/core/expr.pyx): a dense optimiser step is one pass over it.
A Parameters object *is* an Expression: used in an operation, it joins the
current graph once per graph, pointing straight at its values (no copy).
"""

from __future__ import annotations

import re

import numpy as np

from dyn import _config
from dyn._core.core import expr as _expr
from dyn.io import _collections as _io_collections
from dyn.io import _objects as _io_objects
from dyn.ops import _check
from dyn.ops.inputs import _one_dim

_RNG = [np.random.RandomState()]


def seed_initializers(rng: np.random.RandomState):
    _RNG[0] = rng


@_config.on_seed  # dyn.init(seed=...) and reset_random_seed seed the initialisers too
def _seed_from_config(seed):
    seed_initializers(np.random.RandomState(seed))


# ---------------------------------------------------------------- initialisers


class PyInitializer:
    """Base of initialisers: ``initialize(dim, is_lookup)`` returns values for
    a parameter of DyNet dim ``dim`` (for lookups: (d..., N)), column-major."""

    def __init__(self):
        raise AssertionError("PyInitializer is abstract: use one of its subclasses")

    def initialize(self, dim, is_lookup=False):
        raise NotImplementedError


class NormalInitializer(PyInitializer):
    """N(mean, var): note the second argument is the *variance*, as in DyNet."""

    def __init__(self, mean=0.0, var=1.0):
        self.mean, self.var = float(mean), float(var)

    def initialize(self, dim, is_lookup=False):
        return _RNG[0].normal(self.mean, np.sqrt(self.var), size=dim)


class UniformInitializer(PyInitializer):
    """U(-scale, scale)."""

    def __init__(self, scale):
        if scale == 0:
            raise ValueError("UniformInitializer: scale must be non-zero")
        self.scale = float(scale)

    def initialize(self, dim, is_lookup=False):
        return _RNG[0].uniform(-self.scale, self.scale, size=dim)


class ConstInitializer(PyInitializer):
    """Every value c."""

    def __init__(self, c):
        self.c = float(c)

    def initialize(self, dim, is_lookup=False):
        return np.full(dim, self.c)


class IdentityInitializer(PyInitializer):
    """The identity matrix (square parameters only)."""

    def __init__(self):
        pass

    def initialize(self, dim, is_lookup=False):
        if len(dim) != 2 or dim[0] != dim[1]:
            raise ValueError("IdentityInitializer needs a square matrix, got %r" % (dim,))
        return np.eye(dim[0])


class GlorotInitializer(PyInitializer):
    """Glorot/Xavier uniform: U(-s, s), s = gain * sqrt(3k) / sqrt(sum of the k dims)
    (a matrix m x n: sqrt(6/(m+n))); for 4-D filters (FH, FW, Cin, Cout) the fan
    counts the receptive field. With is_lookup the row count is left out."""

    def __init__(self, is_lookup=False, gain=1.0):
        self.is_lookup, self.gain = bool(is_lookup), float(gain)

    def initialize(self, dim, is_lookup=False):
        dims = tuple(dim)
        if len(dims) == 4:
            field = dims[0] * dims[1]
            s = self.gain * np.sqrt(6.0 / (dims[2] * field + dims[3] * field))
        else:
            used = dims[:-1] if self.is_lookup and len(dims) > 1 else dims
            s = self.gain * np.sqrt(3.0 * len(used)) / np.sqrt(sum(used))
        return _RNG[0].uniform(-s, s, size=dims)


class SaxeInitializer(PyInitializer):
    """Random orthonormal matrix (Saxe et al.) times scale."""

    def __init__(self, scale=1.0):
        self.scale = float(scale)

    def initialize(self, dim, is_lookup=False):
        if len(dim) != 2 or dim[0] != dim[1]:
            raise ValueError("SaxeInitializer needs a square matrix, got %r" % (dim,))
        u, _, _ = np.linalg.svd(_RNG[0].normal(0.0, 0.1, size=dim))
        return u * self.scale


class FromFileInitializer(PyInitializer):
    """Whitespace-separated values from a file, column-major."""

    def __init__(self, fname):
        self.fname = fname

    def initialize(self, dim, is_lookup=False):
        with open(self.fname) as f:
            vals = np.array(f.read().split(), dtype=np.float64)
        if vals.size != int(np.prod(dim)):
            raise ValueError(
                "FromFileInitializer: %s holds %d values, the parameter needs %d"
                % (self.fname, vals.size, int(np.prod(dim)))
            )
        return vals.reshape(dim, order="F")


class NumpyInitializer(PyInitializer):
    """Values from a numpy array (its shape must match the parameter's)."""

    def __init__(self, array):
        self.array = _check.real_array(array, "NumpyInitializer", "array")

    def initialize(self, dim, is_lookup=False):
        if self.array.size != int(np.prod(dim)):
            raise ValueError(
                "NumpyInitializer: array of shape %r for a parameter of dim %r"
                % (self.array.shape, tuple(dim))
            )
        return self.array.reshape(dim, order="F") if self.array.shape != tuple(dim) else self.array


def _initializer(init, dim, scale, mean, std):
    if init is None or (isinstance(init, str) and init == "glorot"):
        return GlorotInitializer()
    if isinstance(init, PyInitializer):
        return init
    if isinstance(init, (int, float)) and not isinstance(init, bool):
        return ConstInitializer(init)
    if isinstance(init, str):
        if init == "identity":
            return IdentityInitializer()
        if init == "he":
            return NormalInitializer(0.0, 1.0 / (2.0 * dim[-1]))
        if init == "uniform":
            return UniformInitializer(scale)
        if init == "normal":
            return NormalInitializer(mean, std * std)
    raise ValueError(
        "unknown initializer %r (use None, a number, 'glorot', 'he', 'uniform', "
        "'normal', 'identity', a numpy array or a PyInitializer)" % (init,)
    )


def _dim(dim, name):
    """A parameter's dim as a tuple of positive ints (an int d is (d,)).

    As for dy.zeros, a float with an integral value (3.0) counts as that int;
    any other float, a bool, None or a string is a TypeError naming ``name``."""
    if isinstance(dim, tuple) and dim:
        d = tuple(_one_dim(v, dim, name) for v in dim)
    elif isinstance(dim, (int, np.integer, float)) and not isinstance(dim, (bool, np.bool_)):
        d = (_one_dim(dim, dim, name),)
    else:
        raise TypeError(
            "%s: a parameter dim must be an int or a non-empty tuple, got %s" % (name, _check._show(dim))
        )
    if len(d) > _check.MAXD:
        raise ValueError("%s: a dim has at most %d dimensions, got %r" % (name, _check.MAXD, dim))
    if int(np.prod(d, dtype=object)) > _check.MAX_INDEX:
        raise ValueError(
            "%s: dim %r has more than %d elements, the most a tensor may hold" % (name, dim, _check.MAX_INDEX)
        )
    return d


def _values(arr, name, what="arr"):
    """arr as a float64 array of real numbers (TypeError for complex, None, strings, objects)."""
    return _check.real_array(arr, name, what)


# ---------------------------------------------------------------- Parameters


class Parameters(_expr.ParamExpr):
    """A trainable tensor; usable wherever an Expression is expected."""

    def __init__(self, *_args):
        raise TypeError("create Parameters with ParameterCollection.add_parameters")

    def __str__(self):
        return "Parameter %s" % self._name

    __repr__ = __str__

    def _repr_html_(self):
        from dyn import display

        return "<code>%s %s</code>" % (display.html.escape(str(self)), tuple(self.shape()))

    def _repr_svg_(self):
        return None  # a parameter is not a graph (Expression draws one)

    def name(self):
        return self._name

    def shape(self):
        return self.dyn_dim()

    def as_array(self):
        """Values as a numpy array of shape shape() (a copy)."""
        return self.value_view().reshape(self.shape(), order="F").copy()

    def grad_as_array(self):
        return self.grad_view().reshape(self.shape(), order="F").copy()

    def set_value(self, arr):
        a = _values(arr, "set_value")
        if a.shape != tuple(self.shape()):
            raise ValueError(
                "set_value: array of shape %r for %s of shape %r" % (a.shape, self._name, tuple(self.shape()))
            )
        self.write_values(a.ravel(order="F"))

    def clip_inplace(self, left, right):
        self.write_values(np.clip(self.value_view(), left, right))

    def zero(self):
        self.write_values(np.zeros(self.size))
        self.write_grads(0)

    def scale(self, s):
        self.write_values(self.value_view() * s)

    def scale_gradient(self, s):
        self.write_grads(self.grad_view() * s)

    def is_updated(self):
        return self.updated

    def set_updated(self, b):
        self.updated = bool(b)

    def expr(self, update=False):
        """The parameter in the current graph; by default *constant* (DyNet)."""
        return self._expr(bool(update))

    # saving and loading: see dyn/io/_collections.py
    def save(self, fname, key="", append=False, *, gradients=None, format="safetensors"):
        """Write this parameter to fname, named key (default: its full name).

        Args:
            append: add it after what the file holds (the file is rewritten atomically).
            gradients: also save the gradient (True), never (False), or (None, the default)
                when it is not all zeros, as DyNet does; populate restores a saved gradient and
                zeroes one that was not saved.
            format: "safetensors" (default) or "text" (DyNet's text format).
        """
        _io_collections.save_parameter(self, fname, key, append, gradients, format)

    def populate(self, fname, key=""):
        """Load the saved entry named exactly key (default: this parameter's own
        name); its dim must match. Also reads DyNet's text format."""
        _io_collections.populate_parameter(self, fname, key)

    write_to_textfile = save
    populate_from_textfile = populate


class LookupParameters(Parameters):
    """A table of N embeddings; ``E[i]`` looks up row i (only touched rows
    are updated by sparse trainers). Used whole, it is a (d..., N) matrix."""

    def __str__(self):
        return "LookupParameter %s" % self._name

    __repr__ = __str__

    def __len__(self):
        return self.nrows

    # E[i]: straight to the Cython method (no Python frame: one per word in per-token code)
    __getitem__ = _expr.ParamExpr._row

    def batch(self, indices):
        return self._lookup_batch(_rows(self, indices, "lookup_batch"), True)

    def shape(self):
        d = self.dyn_dim()
        return (d[-1],) + tuple(d[:-1])

    def _row_shape(self):
        return tuple(self.dyn_dim()[:-1])

    def _rows(self, view):
        return view.reshape(self.nrows, self.rowsize)

    def _as_rows(self, view, rows):
        out = self._rows(view)[rows]
        return out.reshape((len(out),) + self._row_shape()[::-1]).transpose(
            (0,) + tuple(range(len(self._row_shape()), 0, -1))
        )

    def as_array(self):
        return self._as_rows(self.value_view(), np.arange(self.nrows)).copy()

    def grad_as_array(self):
        return self._as_rows(self.grad_view(), np.arange(self.nrows)).copy()

    def row_as_array(self, i):
        return self.rows_as_array([i])[0]

    def rows_as_array(self, rows):
        return self._as_rows(self.value_view(), self._check_rows(rows)).copy()

    def row_grad_as_array(self, i):
        return self.rows_grad_as_array([i])[0]

    def rows_grad_as_array(self, rows):
        return self._as_rows(self.grad_view(), self._check_rows(rows)).copy()

    def _check_rows(self, rows, name="rows_as_array"):
        if isinstance(rows, (str, bytes)) or not hasattr(rows, "__iter__"):
            raise TypeError("%s: rows must be a list of integers, got %s" % (name, _check._show(rows)))
        r = [_check.integer(i, name, "row") for i in rows]
        bad = [i for i in r if not 0 <= i < self.nrows]
        if bad:
            raise IndexError(
                "%s: row %d is out of range for %s with %d rows" % (name, bad[0], self._name, self.nrows)
            )
        return np.asarray(r, dtype=np.int64)

    def init_row(self, i, row):
        (i,) = self._check_rows([i], "init_row")
        a = _values(row, "init_row", "row")
        if a.size != self.rowsize:
            raise ValueError("init_row: %d values for rows of %d" % (a.size, self.rowsize))
        values = self.value_view()
        self._rows(values)[i] = (
            a.reshape(self._row_shape()).ravel(order="F") if a.shape == self._row_shape() else a.ravel()
        )
        self.write_values(values)

    def init_from_array(self, arr):
        a = _values(arr, "init_from_array")
        if a.ndim == 0 or len(a) > self.nrows or a[0].size != self.rowsize:
            raise ValueError(
                "init_from_array: array of shape %r for %s of shape %r" % (a.shape, self._name, self.shape())
            )
        values = self.value_view()
        rows = self._rows(values)
        for i in range(len(a)):
            r = a[i]
            rows[i] = (r.reshape(self._row_shape()).ravel(order="F") if r.shape == self._row_shape()
                       else r.ravel())
        self.write_values(values)      # one write: on a device, one copy for the whole table

    def set_value(self, arr):
        a = _values(arr, "set_value")
        if a.shape != tuple(self.shape()):
            raise ValueError(
                "set_value: array of shape %r for %s of shape %r" % (a.shape, self._name, tuple(self.shape()))
            )
        self.init_from_array(a)

    def scalar_value(self, recalculate=False):
        raise RuntimeError("scalar_value() is not defined for LookupParameters")

    def expr(self, update=True):
        return self


# ---------------------------------------------------------------- collections


_NAME_OK = re.compile(r"^[^/_]*$")


class ParameterCollection:
    """A (sub)collection of parameters; DyNet's Model.

    Names follow DyNet: the root is "/", a parameter "a" is "/a", then "/a_1";
    unnamed ones "/_0", "/_1"; sub-collections "/name/". A parameter of a
    sub-collection also belongs to every ancestor (trainers see it).
    """

    def __init__(self, _parent=None, _name="/"):
        self._parent = _parent
        self._name = _name
        self._params = []
        self._lookups = []
        self._counts = {}
        if _parent is None:  # DyNet: the default lambda is --dynet-weight-decay
            self._weight_decay = float(_config.state["weight_decay"])
        else:
            self._weight_decay = _parent._weight_decay

    # names
    def _unique(self, name):
        if not _NAME_OK.match(name):
            raise RuntimeError("parameter and collection names may not contain '/' or '_': %r" % name)
        k = self._counts.get(name, 0)
        self._counts[name] = k + 1
        return name + ("_%d" % k if k > 0 or name == "" else "")

    def name(self):
        return self._name

    def _register(self, p, lookup):
        c = self
        while c is not None:
            (c._lookups if lookup else c._params).append(p)
            c = c._parent

    def _new(self, cls, dim, init_values, name, is_lookup, device=""):
        p = cls.__new__(cls)
        p._setup(_expr.pool_for_current_dtype(_config.device_arg(device, "add_parameters")), dim, is_lookup)
        p._name = self._name + self._unique(name)
        p.write_values(np.asarray(init_values, dtype=np.float64).ravel(order="F"))
        self._register(p, is_lookup)
        return p

    def _new_loaded(self, dim, values, is_lookup):
        """A parameter (is_lookup: a table) of DyNet dim ``dim`` holding saved values;
        the loader names it (dyn/io/_collections.py)."""
        return self._new(LookupParameters if is_lookup else Parameters, dim, values, "", is_lookup)

    def add_parameters(self, dim, init=None, name="", device="", scale=1.0, mean=0.0, std=1.0):
        """A new Parameters of shape ``dim`` (int or tuple).

        Args:
            init: None (Glorot), a number, "glorot", "he", "uniform", "normal",
                "identity", a numpy array (its shape is used) or a PyInitializer.
        """
        if isinstance(init, np.ndarray):
            return self.parameters_from_numpy(init, name=name, device=device)
        d = _dim(dim, "add_parameters")
        values = _initializer(init, d, scale, mean, std).initialize(d, False)
        return self._new(Parameters, d, values, name, False, device)

    def add_lookup_parameters(self, dim, init=None, name="", device="", scale=1.0, mean=0.0, std=1.0):
        """A new table of ``dim[0]`` rows of shape ``dim[1:]`` (an int: rows of 1)."""
        if isinstance(init, np.ndarray):
            return self.lookup_parameters_from_numpy(init, name=name, device=device)
        if isinstance(init, NumpyInitializer):
            raise ValueError("add_lookup_parameters: pass the numpy array itself, not a NumpyInitializer")
        d = _dim(dim, "add_lookup_parameters")
        if len(d) == 1:
            d = (d[0], 1)
        table_dim = tuple(d[1:]) + (d[0],)
        if init == "he":
            init = NormalInitializer(0.0, 1.0 / (2.0 * d[-1]))
        values = _initializer(init, table_dim, scale, mean, std).initialize(table_dim, True)
        return self._new(LookupParameters, table_dim, values, name, True, device)

    def parameters_from_numpy(self, array, name="", device=""):
        a = _values(array, "parameters_from_numpy", "array")
        if a.size == 0:
            raise ValueError("parameters_from_numpy: empty array of shape %r" % (a.shape,))
        return self._new(Parameters, a.shape or (1,), a, name, False, device)

    def lookup_parameters_from_numpy(self, array, name="", device=""):
        a = _values(array, "lookup_parameters_from_numpy", "array")
        if a.ndim == 0 or a.size == 0:
            raise ValueError(
                "lookup_parameters_from_numpy: need an array of rows (at least one axis, not empty), "
                "got shape %r" % (a.shape,)
            )
        if a.ndim == 1:
            a = a[:, None]
        table_dim = a.shape[1:] + (a.shape[0],)
        rows = np.stack([r.ravel(order="F") for r in a])  # row i contiguous
        p = self._new(LookupParameters, table_dim, np.zeros(a.size), name, True, device)
        p.write_values(rows.ravel())
        return p

    def add_subcollection(self, name=None):
        return ParameterCollection(self, self._name + self._unique(name or "") + "/")

    def parameters_list(self):
        return list(self._params)

    def lookup_parameters_list(self):
        return list(self._lookups)

    def __repr__(self):
        from dyn import display

        return display.collection_text(self)

    def _repr_html_(self):
        """A table of the parameters: name, shape, count, device, norms of value and gradient."""
        from dyn import display

        return display.collection_html(self)

    def parameter_count(self):
        return sum(p.size for p in self._params + self._lookups)

    def get_weight_decay(self):
        return self._weight_decay

    def set_weight_decay(self, lam):
        assert isinstance(lam, float)
        if lam < 0:
            raise ValueError("weight decay must be >= 0")
        self._weight_decay = lam

    set_weight_decay_lambda = set_weight_decay

    # saving and loading: see dyn/io/_collections.py
    def save(self, fname, name="", append=False, *, gradients=None, format="safetensors"):
        """Write every parameter, then every lookup parameter, to fname.

        Args:
            name: if given (starting with "/"), saved names use it instead of
                this collection's name as their prefix.
            append: add them after what the file holds (the file is rewritten atomically).
            gradients: also save the gradients (True), never (False), or (None, the default)
                those that are not all zeros, as DyNet does; populate restores saved gradients
                and zeroes the others.
            format: "safetensors" (default) or "text" (DyNet's text format).
        """
        _io_collections.save_collection(self, fname, name, append, gradients, format)

    def populate(self, fname, key=""):
        """Load saved values into this collection's parameters by position (the
        i-th saved parameter into the i-th parameter, lookups likewise), using
        the entries whose names start with key. Counts and dims must match;
        nothing changes otherwise. Also reads DyNet's text format."""
        _io_collections.populate_collection(self, fname, key)

    write_to_textfile = save
    populate_from_textfile = populate

    def load_param(self, fname, key):
        """A new Parameters in this collection from the saved entry named key (name kept)."""
        return _io_collections.load_param(self, fname, key, lookup=False)

    def load_lookup_param(self, fname, key):
        """A new LookupParameters in this collection from the saved entry named key."""
        return _io_collections.load_param(self, fname, key, lookup=True)


Model = ParameterCollection
_io_objects.use_parameter_classes(Parameters, ParameterCollection)  # what dy.save / dy.load take and make

# ---------------------------------------------------------------- graph functions


def parameter(*args):
    """Deprecated identity kept for DyNet programs: Parameters already are
    expressions."""
    return args[0] if len(args) == 1 else args


def const_parameter(*args):
    """The parameter(s) as constants: no gradient flows into them."""
    out = [p.expr(False) if not isinstance(p, LookupParameters) else p._expr(False) for p in args]
    return out[0] if len(out) == 1 else out


def lookup(p, index=0, update=True):
    """Row ``index`` of a lookup table; update=False gives a constant lookup."""
    if not isinstance(p, LookupParameters):
        raise TypeError("lookup: expected LookupParameters, got %s" % type(p).__name__)
    return p._lookup(index, bool(update))  # the core checks the index (type and range, huge ones too)


def lookup_batch(p, indices, update=True):
    """Rows ``indices`` as one expression with batch size len(indices)."""
    if not isinstance(p, LookupParameters):
        raise TypeError("lookup_batch: expected LookupParameters, got %s" % type(p).__name__)
    return p._lookup_batch(_rows(p, indices, "lookup_batch"), bool(update))


def _rows(p, indices, name):
    if isinstance(indices, (str, bytes, dict, set)) or not hasattr(indices, "__iter__"):
        raise TypeError("%s: indices must be a list of integers, got %s" % (name, _check._show(indices)))
    return list(indices)  # each index is checked by the core (type and range), naming the op
