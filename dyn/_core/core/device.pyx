# cython: language_level=3
"""The devices of this process: each device module registers its Device (device.pxd) under a name;
graphs move between them with graph.use_device."""

cdef dict _DEVICES = {}
cdef dict _ARRAYS = {}      # name -> the device's array functions (the parameter pool's memory)


cdef int register_device(str name, Device* d) except -1:
    _DEVICES[name.upper()] = <size_t>d
    return 0


cdef Device* find_device(str name) except NULL:
    """The device called name ("CPU"), or a ValueError naming those there are."""
    key = name.upper()
    if key not in _DEVICES and key.startswith("GPU"):
        _load_gpu(key)
    if key not in _DEVICES:
        raise ValueError("dyn: no device %r here (available: %s)" % (name, ", ".join(sorted(_DEVICES))))
    return <Device*><size_t>_DEVICES[key]


cdef _load_gpu(str key):
    """The GPU device registers itself when first asked for (a CPU program never imports cupy):
    a RuntimeError saying what is missing where there is none."""
    if key != "GPU:0":
        if key == "GPU":
            raise ValueError("dyn: name a GPU by its index, as DyNet: 'GPU:0'")
        import dyn._core.gpu as _gpu
        if _gpu.current() is None:
            _gpu.load()
        raise ValueError("dyn: no device %r here (available: %s): this process uses one GPU, 'GPU:0'"
                         % (key, ", ".join(sorted(_DEVICES))))
    import dyn._core.gpu as _gpu
    _gpu.load()


def load(str name):
    """Make device `name` available (the GPU registers itself when first asked for): ValueError for
    a name that is no device, RuntimeError saying what is missing for a GPU this machine lacks."""
    find_device(name)


def available():
    """The names of the devices this process can run graphs on."""
    return sorted(_DEVICES)


def register_arrays(str name, zeros, to_host, from_host, add_rows):
    """The array functions of device `name` (the parameter pool's and the trainers' memory):
    zeros(n, dtype) makes arrays on the device; to_host(a) gives a host (numpy) array of a's
    contents (a itself where the device's memory is the host's); from_host(h) a device array of
    the host array h's (h itself there); add_rows(table, rows, vals) adds vals[k] to
    table[rows[k]] (rows: a host int array, repeated rows adding up)."""
    _ARRAYS[name.upper()] = (zeros, to_host, from_host, add_rows)


def zeros(str name, long n, dtype):
    """n zeros of dtype in device `name`'s memory (the parameter pool grows with these)."""
    return _ARRAYS[name.upper()][0](n, dtype)


def to_host(str name, a):
    """A host (numpy) array holding a's contents: a itself on the CPU."""
    return _ARRAYS[name.upper()][1](a)


def from_host(str name, h):
    """An array of device `name` holding the host array h's contents: h itself on the CPU."""
    return _ARRAYS[name.upper()][2](h)


def add_rows(str name, table, rows, vals):
    """table[rows[k]] += vals[k] for every k on device `name` (repeated rows add up)."""
    _ARRAYS[name.upper()][3](table, rows, vals)
