# cython: language_level=3
"""The devices of this process: each device module registers its Device (device.pxd) under a name;
graphs move between them with graph.use_device."""

cdef dict _DEVICES = {}


cdef int register_device(str name, Device* d) except -1:
    _DEVICES[name.upper()] = <size_t>d
    return 0


cdef Device* find_device(str name) except NULL:
    """The device called name ("CPU"), or a ValueError naming those there are."""
    key = name.upper()
    if key not in _DEVICES:
        raise ValueError("dyn: no device %r here (available: %s)" % (name, ", ".join(sorted(_DEVICES))))
    return <Device*><size_t>_DEVICES[key]


def available():
    """The names of the devices this process can run graphs on."""
    return sorted(_DEVICES)
