# cython: language_level=3
"""The LSTM nodes: their shape rules, argument checks, constructors, labels and
automatic batching specs (their CPU kernels: dyn/_core/cpu/lstm_gates.pyx and
dyn/_core/cpu/rnn.pyx). Gate rows are DyNet's order [i; f; o; g]: i, f, o
sigmoid (f with a forget bias inside), g tanh.

The fused LSTM nodes of DyNet's CompactVanillaLSTMBuilder: vanilla_lstm_gates
(and its concat / dropout variants), vanilla_lstm_c and vanilla_lstm_h. The
gates node does a whole step's affine transform and nonlinearities with one
matrix product per weight matrix (one gemm for a whole batch), and its
backward is fused likewise (the forget bias is 1).

lstm_step: one whole step of a standard LSTM as one node (the builders' fast
path, dyn/builders/lstm.py). The input projection is NOT done here: the
builder computes it for a whole sequence in one matrix-matrix product
P = b + Wx [x_1 ... x_T] and each step reads its column. So a step is: gates
from column `col` of P plus Wh h_{t-1}, the nonlinearities, the cell and the
output, all in one pass.

Two kinds of node, one kernel:
- dy.lstm_step (public): the value is the stacked state [h_t; c_t] (2H per
  batch element); prev is such a [h; c] vector.
- the builders' steps (lstm_sequence, flag HVAL): the value is h_t alone, so
  it is the layer's output with no extra node; c_t stays in the node's scratch,
  where the next step reads it (flag PSTEP: prev is such a node) and adds its
  gradient back (DCIN, zeroed in forward, read and cleared by the node's own
  backward, which runs after every reader's). lstm_state_c copies c_t out when
  a user asks for it.

The nodes' arguments, ia, fa and aux: dyn/_core/ops/rnn.pxd.
"""
from libc.math cimport INFINITY
from dyn._core.core.graph cimport Graph, Node, Dim, declare_op, dim_size, dim_cols, dim_str, arg, F_FIXED, F_PGRAD, DEV_CPU
from dyn._core.core.graph cimport new_node, finish_node
from dyn._core.core.graph cimport set_autobatch, AB_ON, AB_ALIAS, AB_AUXHEAD, ABA_NO, ABA_CAT, ABA_SHARE, ABA_CATAUX
from dyn._core.core.expr cimport noden, finish, wrap, arg_id, Expression
from dyn._core.ops.util cimport (
    arg_dims, binary_kind, declare_labelled, expr_arg, g_node, looks_like_vector, index_arg, number_arg)

# ---------------------------------------------------------------- vanilla_lstm_gates
# args: x_1..x_m, h_tm1, Wx, Wh, b [, mask_x, mask_h]
# ia: 0 m, 1 flags (DROP, CONCAT), 2 input size I, 3 hidden size H,
#     4 x used in place (one x, no mask, full batch), 5 h used in place; fa[0] weight noise std
# aux (items): d (4H x B, backward) | x (I x B) | h (H x B) | scratch (max(I,H) x B) | noisy Wx, Wh, b


cdef str _gname(int flags):
    return "vanilla_lstm_gates" + ("_dropout" if flags & DROP else "") + ("_concat" if flags & CONCAT else "")


cdef int _shape_gates(Graph* g, Node* n) except -1:
    cdef int m = n.ia[0], drop = n.ia[1] & DROP, k, I = 0, H, B, bx = arg(g, n, 0).dim.bd
    cdef str name = _gname(n.ia[1])
    cdef Node* a
    cdef Node* h = arg(g, n, m)
    for k in range(m):
        a = arg(g, n, k)
        if not looks_like_vector(&a.dim):
            raise ValueError("%s: x_t%s must be a vector, got %s"
                             % (name, "[%d]" % k if m > 1 else "", dim_str(&a.dim)))
        if a.dim.bd != bx:
            raise ValueError("%s: the x_t have different batch sizes (%s)" % (name, arg_dims(g, n)))
        I += a.dim.d[0]
    if not looks_like_vector(&h.dim):
        raise ValueError("%s: h_tm1 must be a vector, got %s" % (name, dim_str(&h.dim)))
    H = h.dim.d[0]
    for k, what, cols in ((1, "Wx", I), (2, "Wh", H), (3, "b", 1)):
        a = arg(g, n, m + k)
        if a.dim.nd > 2 or a.dim.d[0] != 4 * H or dim_cols(&a.dim) != cols:
            raise ValueError("%s: %s must be {%d%s} for hidden size %d and input size %d, got %s"
                             % (name, what, 4 * H, ",%d" % cols if k < 3 else "", H, I, dim_str(&a.dim)))
        if a.dim.bd != 1:
            raise ValueError("%s: %s must not be batched (weights are shared by the batch), got %s"
                             % (name, what, dim_str(&a.dim)))
    if bx > 1 and h.dim.bd > 1 and bx != h.dim.bd:
        raise ValueError("%s: batch sizes differ (%s)" % (name, arg_dims(g, n)))
    B = bx if bx > h.dim.bd else h.dim.bd
    if drop:
        for k, what, size in ((4, "dropout_mask_x", I), (5, "dropout_mask_h", H)):
            a = arg(g, n, m + k)
            if not looks_like_vector(&a.dim) or a.dim.d[0] != size:
                raise ValueError("%s: %s must be a vector {%d}, got %s" % (name, what, size, dim_str(&a.dim)))
            if a.dim.bd != 1 and a.dim.bd != B:
                raise ValueError("%s: %s must have batch size 1 or %d, got %s"
                                 % (name, what, B, dim_str(&a.dim)))
    n.dim.nd = 1
    n.dim.d[0] = 4 * H
    n.dim.bd = B
    n.ia[2] = I
    n.ia[3] = H
    n.ia[4] = m == 1 and not drop and bx == B
    n.ia[5] = not drop and h.dim.bd == B
    n.naux = <long>B * (4 * H + I + H + (I if I > H else H))
    if n.fa[0] > 0:
        n.naux += 4 * H * (I + H + 1)
    return 0


OP_GATES = declare_op("vanilla_lstm_gates", _shape_gates)


cdef list _xlist(object xs, str name):
    if isinstance(xs, Expression):
        return [xs]         # a single input needs no list
    if not isinstance(xs, (list, tuple)):
        raise TypeError("%s: x_t_list must be a list of expressions, got %s" % (name, type(xs).__name__))
    if len(xs) == 0:
        raise ValueError("%s: x_t_list is empty" % name)
    return list(xs)


cdef Expression _gates(list xs, object h, object Wx, object Wh, object b, object mx, object mh,
                       object std, int flags):
    cdef str name = _gname(flags)
    args = xs + [h, Wx, Wh, b] + ([mx, mh] if flags & DROP else [])
    for e in args:
        expr_arg(e, name)
    cdef double sd = number_arg(std, name, "weightnoise_std")     # not float(std): '0.5' and True are no spread
    if not 0.0 <= sd < INFINITY:     # NaN and inf too: noise of infinite spread is no value
        raise ValueError("%s: weightnoise_std must be a finite number >= 0, got %r" % (name, sd))
    cdef int nid = noden(OP_GATES, args, name)
    g_node(nid).ia[0] = len(xs)
    g_node(nid).ia[1] = flags
    g_node(nid).fa[0] = sd
    return finish(nid)


def vanilla_lstm_gates(x_t, h_tm1, Wx, Wh, b, weightnoise_std=0.0):
    return _gates([x_t], h_tm1, Wx, Wh, b, None, None, weightnoise_std, 0)


def vanilla_lstm_gates_concat(x_t_list, h_tm1, Wx, Wh, b, weightnoise_std=0.0):
    return _gates(_xlist(x_t_list, _gname(CONCAT)), h_tm1, Wx, Wh, b, None, None, weightnoise_std, CONCAT)


def vanilla_lstm_gates_dropout(x_t, h_tm1, Wx, Wh, b, dropout_mask_x, dropout_mask_h, weightnoise_std=0.0):
    return _gates([x_t], h_tm1, Wx, Wh, b, dropout_mask_x, dropout_mask_h, weightnoise_std, DROP)


def vanilla_lstm_gates_dropout_concat(x_t_list, h_tm1, Wx, Wh, b, dropout_mask_x, dropout_mask_h,
                                      weightnoise_std=0.0):
    return _gates(_xlist(x_t_list, _gname(DROP | CONCAT)), h_tm1, Wx, Wh, b, dropout_mask_x, dropout_mask_h,
                  weightnoise_std, DROP | CONCAT)

# ---------------------------------------------------------------- vanilla_lstm_c, vanilla_lstm_h
# c_t = i * g + f * c_tm1;  h_t = o * tanh(c_t)  (aux of h: tanh(c_t), kept for backward)


cdef int _shape_ch(Graph* g, Node* n) except -1:
    cdef Node* c = arg(g, n, 0)
    cdef Node* gt = arg(g, n, 1)
    cdef str name = "vanilla_lstm_c" if n.ia[0] == CELL else "vanilla_lstm_h"
    cdef str cname = "c_tm1" if n.ia[0] == CELL else "c_t"
    if not looks_like_vector(&c.dim) or not looks_like_vector(&gt.dim) or gt.dim.d[0] != 4 * c.dim.d[0]:
        raise ValueError("%s: %s must be a vector {H} and gates_t a vector {4H}, got %s"
                         % (name, cname, arg_dims(g, n)))
    if c.dim.bd != gt.dim.bd:
        raise ValueError("%s: %s and gates_t must have the same batch size, got %s" % (name, cname, arg_dims(g, n)))
    n.dim = c.dim
    if n.ia[0] == HIDDEN:
        n.naux = dim_size(&c.dim) * c.dim.bd
    return 0


OP_CH = declare_labelled("vanilla_lstm_c_h", _shape_ch, 0,
                         ("vanilla_lstm_c", "vanilla_lstm_h"))   # CELL, HIDDEN


def vanilla_lstm_c(c_tm1, gates_t):
    return binary_kind(OP_CH, c_tm1, gates_t, CELL, "vanilla_lstm_c")


def vanilla_lstm_h(c_t, gates_t):
    return binary_kind(OP_CH, c_t, gates_t, HIDDEN, "vanilla_lstm_h")

# ---------------------------------------------------------------- lstm_step
# Gate rows are DyNet's order [i; f; o; g]. args: p, [prev], [Wh], [mask_h], [mask_g]
# ia: 0 col, 1 flags (PREV, MASK_H, MASK_G, HVAL, PSTEP), 2 T (columns of p), 3 H, 4 h used in place
# fa: 0 forget bias
# aux: a per-element head (HVAL), then regions of B columns each (see Step in dyn/_core/cpu/rnn.pyx)


cdef str _name(int flags):
    return "lstm_step_dropout" if flags & (MASK_H | MASK_G) else "lstm_step"


cdef int _shape_step(Graph* g, Node* n) except -1:
    cdef int flags = n.ia[1], H, T, B, k = 1
    cdef str name = _name(flags)
    cdef Node* p = arg(g, n, 0)
    cdef Node* a
    if p.dim.nd > 2 or p.dim.d[0] % 4 != 0:
        raise ValueError("%s: p must be a {4H} vector or a {4H,T} matrix of input projections, got %s"
                         % (name, dim_str(&p.dim)))
    H = p.dim.d[0] // 4
    T = dim_cols(&p.dim)
    if n.ia[0] >= T:
        raise IndexError("%s: column %d is out of range for p of %d columns (dim %s)"
                         % (name, n.ia[0], T, dim_str(&p.dim)))
    B = p.dim.bd
    if flags & PREV:
        a = arg(g, n, 1)
        if flags & PSTEP:
            if a.op != OP_STEP or not (a.ia[1] & HVAL) or a.ia[3] != H:
                raise ValueError("%s: prev must be an LSTM state of hidden size %d, got %s"
                                 % (name, H, arg_dims(g, n)))
        elif not looks_like_vector(&a.dim) or a.dim.d[0] != 2 * H:
            raise ValueError("%s: prev must be the stacked state [h; c] {%d} for hidden size %d, got %s"
                             % (name, 2 * H, H, arg_dims(g, n)))
        if a.dim.bd > 1 and B > 1 and a.dim.bd != B:
            raise ValueError("%s: batch sizes differ (%s)" % (name, arg_dims(g, n)))
        B = a.dim.bd if a.dim.bd > B else B
        a = arg(g, n, 2)
        if a.dim.nd != 2 or a.dim.d[0] != 4 * H or a.dim.d[1] != H or a.dim.bd != 1:
            raise ValueError("%s: Wh must be an unbatched {%d,%d} matrix, got %s" % (name, 4 * H, H, arg_dims(g, n)))
        k = 3
    for what, bit in (("mask_h", MASK_H), ("mask_g", MASK_G)):
        if flags & bit:
            a = arg(g, n, k)
            k += 1
            if not looks_like_vector(&a.dim) or a.dim.d[0] != H:
                raise ValueError("%s: %s must be a vector {%d}, got %s" % (name, what, H, dim_str(&a.dim)))
            if a.dim.bd != 1 and B != 1 and a.dim.bd != B:
                raise ValueError("%s: batch sizes differ (%s)" % (name, arg_dims(g, n)))
            B = a.dim.bd if a.dim.bd > B else B
    n.dim.nd = 1
    n.dim.d[0] = H if flags & HVAL else 2 * H
    n.dim.bd = B
    n.ia[2] = T
    n.ia[3] = H
    n.ia[4] = (flags & PREV) != 0 and not (flags & MASK_H) and arg(g, n, 1).dim.bd == B
    n.ia[5] = 2 * H if flags & HVAL else 0
    n.naux = <long>B * 12 * H + <long>B * n.ia[5]
    return 0


OP_STEP = declare_op("lstm_step", _shape_step)

# ---------------------------------------------------------------- lstm_step_weight
# The recurrent matrix as seen by a sequence's lstm_step nodes. Forward: the
# same memory as its argument (no copy). Backward runs after every step's
# (it was created before them): dWh = sum_t d_t h_{t-1}^T as ONE matrix
# product over the gathered d_t and h_{t-1} of the live steps that read it,
# instead of a rank-1 update of the whole matrix per step.


cdef int _shape_weight(Graph* g, Node* n) except -1:
    cdef Node* w = arg(g, n, 0)
    if w.dim.nd != 2 or w.dim.d[0] != 4 * w.dim.d[1] or w.dim.bd != 1:
        raise ValueError("lstm_step_weight: Wh must be an unbatched {4H,H} matrix, got %s" % dim_str(&w.dim))
    n.dim = w.dim
    n.flags |= F_FIXED
    if (w.flags & F_PGRAD) and g.device == DEV_CPU:    # a parameter's gradient: the alias's too
        n.flags |= F_PGRAD
        n.gptr = w.gptr
    # float32 on the CPU, H >= WT_MIN_H: room for Wh's transpose, which the steps' backward
    # makes once per pass when their minibatch is wide (dyn/_core/cpu/rnn.pyx, _wh_t_d)
    n.ia[0] = 0
    if g.dtype == 0 and g.device == DEV_CPU and w.dim.d[1] >= WT_MIN_H:
        n.naux = <long>w.dim.d[0] * w.dim.d[1]
    return 0


OP_WEIGHT = declare_op("lstm_step_weight", _shape_weight)


def lstm_step_weight(Wh):
    expr_arg(Wh, "lstm_step_weight")
    return finish(noden(OP_WEIGHT, [Wh], "lstm_step_weight"))


def lstm_sequence(P, prev, Wh, mask_h, mask_g, int T, double forget_bias):
    """The builders' loop: h-valued lstm_step nodes for columns 0..T-1 of P, created here in C.
    A node's value is h_t; its c_t stays in its scratch, where the next step (and lstm_state_c)
    reads it. prev: None (start without a previous state; Wh and mask_h are then used from the
    second step on), such a node, or a stacked state [h; c]. Returns the list of h nodes."""
    cdef int t, k, flags, nid, s_id = -1, P_id, Wh_id, mh_id = -1, mg_id = -1, pstep = 0
    cdef int ids[5]
    cdef list hs = []
    cdef Node* n
    for e in (P, Wh):
        expr_arg(e, "lstm_step")
    for e in (prev, mask_h, mask_g):
        if e is not None:
            expr_arg(e, "lstm_step")
    # the arguments' node ids once (what noden would look up at every step)
    P_id, Wh_id = arg_id(P, OP_STEP), arg_id(Wh, OP_STEP)
    if prev is not None:
        s_id = arg_id(prev, OP_STEP)
        n = g_node(s_id)
        pstep = n.op == OP_STEP and (n.ia[1] & HVAL) != 0
    if mask_h is not None:
        mh_id = arg_id(mask_h, OP_STEP)
    if mask_g is not None:
        mg_id = arg_id(mask_g, OP_STEP)
    for t in range(T):
        ids[0] = P_id
        k = 1
        flags = HVAL
        if s_id >= 0:
            flags |= PREV | (PSTEP if pstep else 0)
            ids[1] = s_id
            ids[2] = Wh_id
            k = 3
            if mh_id >= 0:
                flags |= MASK_H
                ids[k] = mh_id
                k += 1
        if mg_id >= 0:
            flags |= MASK_G
            ids[k] = mg_id
            k += 1
        nid = new_node(OP_STEP, k, ids)
        n = g_node(nid)
        n.ia[0] = t
        n.ia[1] = flags
        n.fa[0] = forget_bias
        finish_node(nid)
        hs.append(wrap(nid))
        s_id = nid
        pstep = 1
    return hs


def lstm_step(p, prev, Wh, mask_h, mask_g, col, forget_bias, str name):
    """Python-level builder: prev and Wh both given or both None; masks None or expressions."""
    cdef int flags = 0
    args = [p]
    if (prev is None) != (Wh is None):
        raise ValueError("%s: prev and Wh are given together (both None on a first step)" % name)
    if prev is not None:
        flags |= PREV
        args += [prev, Wh]
    if mask_h is not None:
        if prev is None:
            raise ValueError("%s: mask_h needs a previous state" % name)
        flags |= MASK_H
        args.append(mask_h)
    if mask_g is not None:
        flags |= MASK_G
        args.append(mask_g)
    for e in args:
        expr_arg(e, name)
    cdef double fb = number_arg(forget_bias, name, "forget_bias")
    cdef int c = index_arg(col, name)
    cdef int nid = noden(OP_STEP, args, name)
    g_node(nid).ia[0] = c
    g_node(nid).ia[1] = flags
    g_node(nid).fa[0] = fb
    return finish(nid)


# ---------------------------------------------------------------- lstm_state_c
# c_t of an h-valued lstm_step node (the builders' states, when c() or s() is asked for):
# a copy out of its scratch; backward adds into the node's DCIN. It runs alone (not batched).

cdef int _shape_cell(Graph* g, Node* n) except -1:
    cdef Node* s = arg(g, n, 0)
    if s.op != OP_STEP or not (s.ia[1] & HVAL):
        raise ValueError("lstm_state_c: expected an LSTM builder's h_t (an h-valued lstm_step), got %s"
                         % dim_str(&s.dim))
    n.dim = s.dim
    return 0


OP_CELL = declare_op("lstm_state_c", _shape_cell)


def lstm_state_c(h):
    """c_t of an LSTM builder state whose h_t is an h-valued lstm_step node (lstm_sequence)."""
    expr_arg(h, "lstm_state_c")
    return finish(noden(OP_CELL, [h], "lstm_state_c"))


# ---------------------------------------------------------------- lstm_step_h, lstm_step_c
# y = rows [off, off + H) of each batch element of s ({2H}); ia[0] = off (0: h, H: c)

cdef int _shape_part(Graph* g, Node* n) except -1:
    cdef Node* s = arg(g, n, 0)
    if not looks_like_vector(&s.dim) or s.dim.d[0] % 2 != 0:
        raise ValueError("%s: expected an lstm_step value [h; c] {2H}, got %s"
                         % ("lstm_step_c" if n.ia[1] else "lstm_step_h", dim_str(&s.dim)))
    n.dim.nd = 1
    n.dim.d[0] = s.dim.d[0] // 2
    n.dim.bd = s.dim.bd
    n.ia[0] = n.dim.d[0] if n.ia[1] else 0
    return 0


OP_PART = declare_labelled("lstm_step_part", _shape_part, 1, ("lstm_step_h", "lstm_step_c"))


def lstm_step_part(s, int which, str name):
    """h (which 0) or c (which 1) of an lstm_step value."""
    expr_arg(s, name)
    cdef int nid = noden(OP_PART, [s], name)
    g_node(nid).ia[1] = which
    return finish(nid)

# ---------------------------------------------------------------- automatic batching (dyn/_core/core/autobatch.pyx)
# DyNet's VanillaLSTMGates signature: Wx, Wh, b (and batch-1 dropout masks)
# shared, the x_t and h_tm1 concatenated. Weight noise draws one sample per
# node, so noisy nodes run alone.

cdef int _ab_arg_gates(Graph* g, Node* n, int k, int* off, Dim* wd) noexcept:
    cdef Node* a = arg(g, n, k)
    cdef int m = n.ia[0]
    if n.fa[0] > 0:
        return ABA_NO
    if k > m:                      # Wx, Wh, b, masks
        if a.dim.bd == 1:
            return ABA_SHARE
    return ABA_CAT if a.dim.bd == n.dim.bd else ABA_NO


set_autobatch(OP_GATES, AB_ON, 0, 0x3f, _ab_arg_gates)
set_autobatch(OP_CH, AB_ON)

# Steps of different sequences run as one step: each member reads its own
# column of its own projection P (a window of 4H items: adjacent when the
# projections are), the previous states are concatenated, Wh (through its
# lstm_step_weight alias) and the dropout masks are shared.

cdef int _ab_arg_step(Graph* g, Node* n, int k, int* off, Dim* wd) noexcept:
    cdef Node* a = arg(g, n, k)
    cdef int flags = n.ia[1]
    if k == 0:
        if a.dim.bd != 1 or n.dim.bd != 1:
            return ABA_NO          # a batched P: a member's column is not one block
        off[0] = n.ia[0] * 4 * n.ia[3]
        wd.nd = 1
        wd.d[0] = 4 * n.ia[3]
        wd.bd = 1
        return ABA_CAT
    if (flags & PREV) and k == 1:
        if a.dim.bd != n.dim.bd:
            return ABA_NO
        return ABA_CATAUX if flags & PSTEP else ABA_CAT
    if (flags & PREV) and k == 2:
        return ABA_SHARE
    if a.dim.bd == 1:              # masks: one per builder and graph
        return ABA_SHARE
    return ABA_CAT if a.dim.bd == n.dim.bd else ABA_NO


cdef void _ab_fix_step(Graph* g, Node* n) noexcept:
    n.ia[0] = 0                    # the gathered columns form a {4H} x members projection
    n.ia[2] = 1


# P and the parts' states may come per member (no gathered copy): the kernels read them by element
# (an h-valued prev comes per member with its head [c; DCIN]: ABA_CATAUX, AB_AUXHEAD)
set_autobatch(OP_STEP, AB_ON | AB_AUXHEAD, 0, 0x1a, _ab_arg_step, _ab_fix_step, 1)   # ia: flags, H, h in place
set_autobatch(OP_PART, AB_ON, 0, 0x3f, NULL, NULL, 1)
set_autobatch(OP_WEIGHT, AB_ALIAS)
