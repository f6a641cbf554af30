# The CPU device (implementation: memory.pyx): the default device of graphs.
from dyn._core.core.device cimport Device

cdef Device* cpu_device() noexcept nogil
