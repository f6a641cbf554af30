# The LSTM nodes' definition (dyn/_core/ops/rnn.pyx), shared with their CPU kernels
# (dyn/_core/cpu/lstm_gates.pyx: the vanilla LSTM gates and cell; dyn/_core/cpu/rnn.pyx: lstm_step).

# ---------------------------------------------------------------- vanilla_lstm_gates
# args: x_1..x_m, h_tm1, Wx, Wh, b [, mask_x, mask_h]
# ia: 0 m, 1 flags (DROP, CONCAT), 2 input size I, 3 hidden size H,
#     4 x used in place (one x, no mask, full batch), 5 h used in place; fa[0] weight noise std
# aux (items): d (4H x B, backward) | x (I x B) | h (H x B) | scratch (max(I,H) x B) | noisy Wx, Wh, b

cdef enum:
    DROP = 1
    CONCAT = 2

# ---------------------------------------------------------------- vanilla_lstm_c, vanilla_lstm_h
# args: c, gates; ia[0] the kind (aux of h: tanh(c_t), kept for backward)

cdef enum:
    CELL, HIDDEN

# ---------------------------------------------------------------- lstm_step
# args: p, [prev], [Wh], [mask_h], [mask_g]
# ia: 0 col, 1 flags, 2 T (columns of p), 3 H, 4 h used in place, 5 the head per element (HVAL: 2H)
# fa: 0 forget bias
# aux (items): with HVAL first a head of 2H per batch element, [c_t; d c_t from the next step]
# (DCIN), then regions of B columns each (see Step in dyn/_core/cpu/rnn.pyx)

cdef enum:
    PREV = 1
    MASK_H = 2
    MASK_G = 4
    HVAL = 8        # the value is h alone; c_t (and the gradient of c_t from the next step) lives in aux
    PSTEP = 16      # prev is such an h-valued lstm_step node: h_{t-1} its value, c_{t-1} in its aux

# lstm_step_weight: ia[0] the backward pass whose Wh^T its aux holds (1 + the low 30 bits of Graph.nbwd;
# 0: none). aux (float32 on the CPU, H >= WT_MIN_H): room for that transpose, H x 4H.

cdef enum:
    WT_MIN_H = 128

# lstm_step_part: ia[0] the offset of the part (0: h, H: c), ia[1] which (0 h, 1 c)

cdef int OP_GATES       # vanilla_lstm_gates (and its concat / dropout variants)
cdef int OP_CH          # vanilla_lstm_c, vanilla_lstm_h
cdef int OP_STEP        # lstm_step (and the builders' h-valued steps)
cdef int OP_WEIGHT      # lstm_step_weight
cdef int OP_CELL        # lstm_state_c
cdef int OP_PART        # lstm_step_h, lstm_step_c
