# The queue of weight-gradient products G += D X^T (dyn/_core/cpu/outerq.pyx), shared by the fused
# Tree-LSTM nodes (treelstm.pyx, treeweights.pyx) and the LSTM steps (rnn.pyx).
from dyn._core.core.types cimport real

# G (m x k, ld ldg) += D X^T for D m x n (ld ldd) and X k x n (ld ldx), now.
cdef void outer_now(int m, int k, int n, real* D, int ldd, real* X, int ldx, real* G, int ldg) noexcept
# The same product queued (D and X must stay as they are until it runs); False (nothing queued)
# when the queue cannot grow: do it now instead.
cdef bint outer_queue(char* G, char* D, int ldd, char* X, int ldx, int m, int k, int n, int ldg,
                      int isz) noexcept
# The queued products into gradients in [lo, hi), now: one product per G over all its columns.
cdef void outer_flush(char* lo, char* hi) noexcept
# Whether parameters' weight products may wait for the end of backward (_set_deferred).
cdef bint outer_deferring() noexcept
