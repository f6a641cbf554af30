# The fused tree nodes' definition (dyn/_core/ops/treelstm.pyx), shared with their CPU kernels
# (dyn/_core/cpu/treelstm.pyx, dyn/_core/cpu/treeweights.pyx).

cdef enum:
    NARY = 0          # N-ary Tree-LSTM
    RNN = 1           # tree RNN: h = tanh(b + Wx x + sum_j U_{e_j} h_j)
    CSUM = 2          # child-sum Tree-LSTM

# A tree node (nary_tree_lstm, tree_rnn, child_sum_tree_lstm):
# args: U, b [, Wx, x] [, Uc] , child_1 .. child_p
# ia: 0 mode, 1 has x, 2 has Uc, 3 I, 4 H, 5 N;  fa[0] forget bias
# tree_state_part: ia[0] the part (0 h, 1 c).  tree_weights: the weight alias the tree nodes defer
# their weight products to.
cdef int OP_NARY, OP_RNN, OP_CSUM, OP_PART, OP_W

cdef bint is_tree_op(int op) noexcept


cdef inline int _rows(int mode, int H, int P) noexcept nogil:
    """Gate rows of a node with P child positions (the aux size and the kernels' layout agree on it)."""
    if mode == NARY:
        return (3 + P) * H
    if mode == RNN:
        return H
    return 4 * H
