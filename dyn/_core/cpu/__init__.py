"""The CPU device: its memory operations (memory), the per-family kernels (loops registered in the
kernel table), BLAS and the vectorised C headers."""
