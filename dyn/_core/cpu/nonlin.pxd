# exp and log in a kernel's float type (libm's float functions for float32), shared by the
# nonlinearities' kernels (cpu/nonlin.pyx) and the softmax family's (cpu/softmax.pyx).
from libc.math cimport exp as c_exp, log as c_log, expf, logf
from dyn._core.core.types cimport real


cdef inline real _exp(real x) noexcept nogil:
    if real is float:
        return expf(x)
    else:
        return c_exp(x)


cdef inline real _log(real x) noexcept nogil:
    if real is float:
        return logf(x)
    else:
        return c_log(x)
