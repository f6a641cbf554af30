# The device interface and the registry of devices (implementation: device.pyx; the CPU device:
# dyn/_core/cpu/memory.pyx).
#
# A Device owns value memory: the graph's arenas are blocks it allocates, and everything that moves
# or clears values outside a kernel (zeroing the gradient arena, the autobatching engine's gathers
# and scatter-adds) goes through it. The graph, the node table, scheduling and the autobatching plan
# stay on the host and only ever hold pointers (offsets) into the device's memory. The CPU device
# is malloc and compiled loops; a GPU device fills the same table with its own functions.

cdef enum:
    ALIGN = 64        # bytes: every block a device allocates is aligned so, and arena offsets too

ctypedef struct Device:
    int kind                        # DEV_CPU or DEV_GPU (_graph.pxd): the kernel table's device axis
    char name[16]
    # nbytes of device memory, 64-byte aligned; NULL when there is none (the caller raises)
    void* (*alloc)(size_t nbytes) noexcept nogil
    void (*release)(void* p) noexcept nogil
    void (*zero)(void* p, size_t nbytes) noexcept nogil
    void (*copy)(void* dst, const void* src, size_t nbytes) noexcept nogil
    # between the device and host memory (numpy arrays): what value() reads back, what inputs send
    void (*to_host)(void* host, const void* src, size_t nbytes) noexcept nogil
    void (*from_host)(void* dst, const void* host, size_t nbytes) noexcept nogil
    # dst = the m pieces srcs[j] (lens[j] items of isz bytes each) one after the other
    void (*gather)(char* dst, char** srcs, const long* lens, int m, int isz) noexcept nogil
    # dsts[j] += the j-th piece of src (lens[j] items of dtype 0 float32 / 1 float64); NULL dsts skipped
    void (*scatter_add)(char** dsts, const char* src, const long* lens, int m, int dtype) noexcept nogil
    # p[0] += v (seeding backward with d loss / d loss = 1)
    void (*add_scalar)(void* p, double v, int dtype) noexcept nogil
    # the index of the first NaN or Inf among p's n items, or -1 (check_validity)
    long (*find_nonfinite)(const void* p, long n, int dtype) noexcept nogil
    # 1 where a block's memory costs nothing until first touched (the CPU's: the kernel backs
    # pages on first write), so the graph sizes arena blocks with ample room to grow
    int lazy

cdef int register_device(str name, Device* d) except -1
cdef Device* find_device(str name) except NULL
