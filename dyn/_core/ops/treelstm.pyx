# cython: language_level=3
"""Fused tree nodes: one graph node per tree node for the tree builders (their definition: shapes,
checks, constructors, automatic batching; the CPU kernels: dyn/_core/cpu/treelstm.pyx and
dyn/_core/cpu/treeweights.pyx).

nary_tree_lstm (Tai et al. 2015, section 3.2; DyNet's NaryTreeLSTMBuilder),
child_sum_tree_lstm (Tai et al., section 3.1) and tree_rnn (the recursive
network of the DyNet paper's Figure 2). A node reads its input x, the states
of its children and the weights; all its gates come from one matrix product
per weight matrix, and its backward is fused the same way.

Children are vectors [h; c] ({2H}; tree_rnn: h, {H}); the output is the same.
In the positional (N-ary) cells child j uses the weight block e_j = min(j, N-1)
(DyNet: extra children share the last block), and only the blocks of the
P = min(#children, N) present positions (a prefix) take part in the products.

Gate rows of the N-ary LSTM: [i; o; u; f_0 .. f_{N-1}] ((3 + N) H); of the
child-sum LSTM: [i; o; u; f] (4H).

tree_weights: deferred weight gradients. A builder passes each weight matrix
through one tree_weights node per graph; tree nodes then skip their weight
products, and the wrapper, whose backward runs after all of theirs (it was
created before them), does them as one matrix product per group of alike
nodes. Its value is the weight's own memory and its gradient the weight's
gradient, so other consumers of the wrapper accumulate there directly.
"""
from dyn._core.core.graph cimport Graph, Node, Dim, cg, declare_op, shape_fn, dim_str, arg, F_FIXED, F_PGRAD
from dyn._core.core.graph cimport set_autobatch, AB_ON, AB_PTR_ALL, AB_ALIAS, ABA_NO, ABA_CAT, ABA_SHARE
from dyn._core.core.expr cimport node1, noden, finish, Expression
from dyn._core.core.expr import all_alive

_NAMES = ("nary_tree_lstm", "tree_rnn", "child_sum_tree_lstm")


cdef long _naux(int mode, int huc, int I, int H, int p, int P, int B) noexcept:
    cdef long K = P * H if mode != CSUM else (H if p > 0 else 0)
    cdef long R = _rows(mode, H, P)
    cdef long pm = p if mode == CSUM else 0
    cdef long mx = I if I > H else H
    return <long>B * (I + K + (K if huc else 0) + H * pm + R + H * pm + H + R + H * pm + H + mx)

# ---------------------------------------------------------------- shapes


cdef bint _is_vec(const Dim* d) noexcept nogil:
    cdef int k
    for k in range(1, d.nd):
        if d.d[k] != 1:
            return False
    return True


cdef int _cols(const Dim* d) noexcept nogil:
    return d.d[1] if d.nd > 1 else 1


cdef int _shape_tree(Graph* g, Node* n) except -1:
    cdef int mode = n.ia[0], hx = n.ia[1], huc = n.ia[2]
    cdef str name = _NAMES[mode]
    cdef Node* U = arg(g, n, 0)
    cdef Node* a
    cdef int Rt, KN, H, N, I = 0, k, j, c0, p, B = 1, cs
    for k in range(n.nargs):
        if arg(g, n, k).dim.nd > 2:
            raise ValueError("%s: argument %d must be a vector or matrix, got %s"
                             % (name, k, dim_str(&arg(g, n, k).dim)))
    Rt = U.dim.d[0]
    KN = _cols(&U.dim)
    if mode == NARY:
        H = (Rt - KN) // 3
        if Rt <= KN or (Rt - KN) % 3 or KN % H:
            raise ValueError("%s: U must be {(3+N)H, NH} for N >= 1 children positions, got %s"
                             % (name, dim_str(&U.dim)))
        N = KN // H
    elif mode == RNN:
        H = Rt
        if KN % H:
            raise ValueError("%s: U must be {H, NH} for N >= 1 children positions, got %s"
                             % (name, dim_str(&U.dim)))
        N = KN // H
    else:
        H = KN
        N = 1
        if Rt != 4 * H:
            raise ValueError("%s: U must be {4H, H}, got %s" % (name, dim_str(&U.dim)))
    a = arg(g, n, 1)
    if not _is_vec(&a.dim) or a.dim.d[0] != Rt:
        raise ValueError("%s: b must be a vector {%d} (the rows of U), got %s" % (name, Rt, dim_str(&a.dim)))
    k = 2
    if hx:
        a = arg(g, n, 3)
        if not _is_vec(&a.dim):
            raise ValueError("%s: x must be a vector, got %s" % (name, dim_str(&a.dim)))
        I = a.dim.d[0]
        B = a.dim.bd
        a = arg(g, n, 2)
        if a.dim.d[0] != Rt or _cols(&a.dim) != I:
            raise ValueError("%s: Wx must be {%d,%d} for U %s and x of size %d, got %s"
                             % (name, Rt, I, dim_str(&U.dim), I, dim_str(&a.dim)))
        k = 4
    if huc:
        a = arg(g, n, k)
        if a.dim.d[0] != (2 + N) * H or _cols(&a.dim) != N * H:
            raise ValueError("%s: Uc must be {%d,%d} for hidden size %d and N = %d, got %s"
                             % (name, (2 + N) * H, N * H, H, N, dim_str(&a.dim)))
        k += 1
    for j in range(k):
        if j != 3 or not hx:
            a = arg(g, n, j)
            if a.dim.bd != 1:
                raise ValueError("%s: the weights must not be batched (they are shared by the batch), got %s"
                                 % (name, dim_str(&a.dim)))
    c0 = k
    p = n.nargs - c0
    if p == 0 and not hx:
        raise ValueError("%s: a node needs an input x or at least one child" % name)
    cs = H if mode == RNN else 2 * H
    for j in range(p):
        a = arg(g, n, c0 + j)
        if not _is_vec(&a.dim) or a.dim.d[0] != cs:
            raise ValueError("%s: child %d must be a vector {%d} (%s), got %s"
                             % (name, j, cs, "h" if mode == RNN else "[h; c]", dim_str(&a.dim)))
        if a.dim.bd > 1:
            if B > 1 and a.dim.bd != B:
                raise ValueError("%s: batch sizes differ: child %d has %d, expected 1 or %d"
                                 % (name, j, a.dim.bd, B))
            B = a.dim.bd
    n.dim.nd = 1
    n.dim.d[0] = cs
    n.dim.bd = B
    n.ia[3] = I
    n.ia[4] = H
    n.ia[5] = N
    n.naux = _naux(mode, huc, I, H, p, p if p < N else N, B)
    return 0


OP_NARY = declare_op("nary_tree_lstm", _shape_tree)
OP_RNN = declare_op("tree_rnn", _shape_tree)
OP_CSUM = declare_op("child_sum_tree_lstm", _shape_tree)


cdef bint is_tree_op(int op) noexcept:
    return op == OP_NARY or op == OP_RNN or op == OP_CSUM



# ---------------------------------------------------------------- Python builders


cdef int _check_expr(object e, str what, str name) except -1:
    if not isinstance(e, Expression):
        raise TypeError("%s: %s must be an Expression (or Parameters), got %s" % (name, what, type(e).__name__))
    return 0


cdef inline int _check_child(object e, int j, str name) except -1:
    if not isinstance(e, Expression):     # (the message is formatted only when it is raised)
        _check_expr(e, "child %d" % j, name)
    return 0


def tree_node(int mode, x, Wx, U, b, children, Uc=None, double forget_bias=1.0):
    """One fused tree node (see the module docstring); mode 0 N-ary LSTM, 1 RNN, 2 child-sum."""
    return _tree_node(mode, x, Wx, U, b, children, Uc, forget_bias)


cdef Expression _tree_node(int mode, x, Wx, U, b, children, Uc, double forget_bias):
    cdef str name = _NAMES[mode]
    if isinstance(children, Expression):
        children = [children]
    elif not isinstance(children, (list, tuple)):
        raise TypeError("%s: children must be a list of expressions, got %s" % (name, type(children).__name__))
    _check_expr(U, "U", name)
    _check_expr(b, "b", name)
    args = [U, b]
    if x is not None:
        _check_expr(x, "x", name)
        _check_expr(Wx, "Wx", name)
        args += [Wx, x]
    if Uc is not None:
        if mode != NARY:
            raise ValueError("%s: Uc (cell terms) exists only for nary_tree_lstm" % name)
        _check_expr(Uc, "Uc", name)
        args.append(Uc)
    cdef int j = 0
    for c in children:
        _check_child(c, j, name)
        j += 1
    args.extend(children)
    cdef int nid = noden(OP_NARY if mode == NARY else (OP_RNN if mode == RNN else OP_CSUM), args, name)
    cdef Node* n = &cg().nodes[nid]
    n.ia[0] = mode
    n.ia[1] = x is not None
    n.ia[2] = Uc is not None
    n.fa[0] = forget_bias
    return finish(nid)


# ---------------------------------------------------------------- tree_state_part: h or c of [h; c]


cdef int _shape_part(Graph* g, Node* n) except -1:
    cdef Node* a = arg(g, n, 0)
    if not _is_vec(&a.dim) or a.dim.d[0] % 2:
        raise ValueError("tree_state_part: the state must be a vector [h; c] {2H}, got %s" % dim_str(&a.dim))
    n.dim.nd = 1
    n.dim.d[0] = a.dim.d[0] // 2
    n.dim.bd = a.dim.bd
    return 0


OP_PART = declare_op("tree_state_part", _shape_part)


def state_part(x, int part):
    """h (part 0) or c (part 1) of a stacked state [h; c] (a pick_range without an index list)."""
    return _state_part(x, part)


cdef Expression _state_part(x, int part):
    _check_expr(x, "x", "tree_state_part")
    cdef int nid = node1(OP_PART, x)
    cg().nodes[nid].ia[0] = part
    return finish(nid)

# ---------------------------------------------------------------- TreeState and the builders' common node
# dyn/builders/tree.py builds one TreeState per tree node; in the common case (one fused layer, no
# dropout) compose_fused checks the children and makes the node and its state here, without the
# Python method calls of the general path.


cdef class TreeState:
    """A tree node's state: what a builder's ``add_input``/``compose`` return.

    Attributes are read through methods, as RNNState's: ``output()`` (the top
    layer's h), ``h()`` (per-layer h), ``s()`` (LSTMs: ``(c_1..c_L, h_1..h_L)``),
    ``children()`` and ``b()`` (the builder).
    """

    cdef readonly object _builder
    cdef readonly tuple _s           # per layer: the fused node's state ([h; c] or h)
    cdef readonly tuple _children
    cdef readonly long _ver          # graph version
    cdef list _h                     # per layer h, made on first use (most states are never asked)
    cdef tuple _c

    def __init__(self, builder, states, children, long version):
        self._builder, self._s, self._children, self._ver = builder, tuple(states), tuple(children), version

    cdef Expression _h_of(self, int layer):
        if self._h is None:
            self._h = [None] * len(self._s)
        h = self._h[layer]
        if h is None or not (<Expression>h)._alive():    # made later and dropped by cg_revert()
            s = self._s[layer]
            h = self._h[layer] = _state_part(s, 0) if self._builder._has_cell else s
        return h

    def output(self):
        """The top layer's h."""
        return self._h_of(len(self._s) - 1)

    def h(self):
        """Per-layer h (a tuple)."""
        return tuple([self._h_of(layer) for layer in range(len(self._s))])

    def s(self):
        """The full state: LSTMs ``(c_1..c_L, h_1..h_L)``, otherwise as h()."""
        if not self._builder._has_cell:
            return self.h()
        if self._c is None or not all_alive(self._c):
            self._c = tuple([_state_part(s, 1) for s in self._s])
        return self._c + self.h()

    def packed(self):
        """Per-layer state vectors as the fused nodes hold them (LSTMs: [h; c])."""
        return self._s

    def children(self):
        return self._children

    def b(self):
        return self._builder


cpdef tuple check_compose(builder, long version, children, x):
    """TreeBuilderBase.compose's checks (both paths): the children as a tuple of TreeStates of
    this builder in this graph (version), x None or an Expression, and not both empty."""
    cdef tuple kids = tuple(children)
    for o in kids:
        if type(o) is not TreeState or (<TreeState>o)._builder is not builder:
            raise TypeError("%s.compose: children must be TreeStates of this builder, got %r"
                            % (type(builder).__name__, o))
        if (<TreeState>o)._ver != version:
            raise ValueError("%s.compose: a child belongs to an earlier computation graph" % type(builder).__name__)
    if x is not None and not isinstance(x, Expression):
        raise TypeError("%s: x must be an Expression, got %s" % (type(builder).__name__, type(x).__name__))
    if x is None and not kids:
        raise ValueError("%s: a node needs an input x or at least one child" % type(builder).__name__)
    return kids


def compose_fused(builder, long version, children, x, int mode, tuple weights, double forget_bias):
    """TreeBuilderBase.compose for a one-layer fused builder without dropout: the TreeState of a
    node over the child states ``children`` and input x (or None). weights: (Wx, U, b, Uc or None),
    this graph's expressions."""
    cdef tuple kids = check_compose(builder, version, children, x)
    cdef TreeState out = TreeState.__new__(TreeState)
    out._s = (_tree_node(mode, x, weights[0], weights[1], weights[2], [(<TreeState>c)._s[0] for c in kids],
                         weights[3], forget_bias),)
    out._builder, out._children, out._ver = builder, kids, version
    return out


# ---------------------------------------------------------------- tree_weights: a weight's alias


cdef int _shape_w(Graph* g, Node* n) except -1:
    cdef Node* a = arg(g, n, 0)
    n.dim = a.dim
    if a.flags & F_FIXED:       # the weight's own memory, no copy
        n.v = a.v
        n.flags |= F_FIXED
    if a.flags & F_PGRAD:       # and its gradient: nothing to zero or copy back
        n.flags |= F_PGRAD
        n.gptr = a.gptr
    return 0


OP_W = declare_op("tree_weights", _shape_w)


def tree_weights(W):
    """W itself, as the node through which tree nodes defer their weight products (see above)."""
    if not isinstance(W, Expression):
        raise TypeError("tree_weights: W must be an Expression (or Parameters), got %s" % type(W).__name__)
    return finish(node1(OP_W, W))

# ---------------------------------------------------------------- automatic batching (dyn/_core/core/autobatch.pyx)
# Tree nodes with the same number of children (of different trees, or of one)
# run as one node: U, b, Wx, Uc shared (through their tree_weights aliases,
# which the engine replaces by the weights), x and the children concatenated.

cdef int _ab_arg_tree(Graph* g, Node* n, int k, int* off, Dim* wd) noexcept:
    cdef Node* a = arg(g, n, k)
    cdef int c0 = 2
    if n.ia[1]:
        c0 = 4
    if n.ia[2]:
        c0 += 1
    if k < c0 and not (n.ia[1] and k == 3):   # U, b, Wx, Uc
        return ABA_SHARE if a.dim.bd == 1 else ABA_NO
    return ABA_CAT if a.dim.bd == n.dim.bd else ABA_NO


# x and the children are read element by element (elem_v/elem_g): batches pass them per member
set_autobatch(OP_NARY, AB_ON, 0, 0x3f, _ab_arg_tree, NULL, AB_PTR_ALL)
set_autobatch(OP_RNN, AB_ON, 0, 0x3f, _ab_arg_tree, NULL, AB_PTR_ALL)
set_autobatch(OP_CSUM, AB_ON, 0, 0x3f, _ab_arg_tree, NULL, AB_PTR_ALL)
set_autobatch(OP_PART, AB_ON, 0, 0x3f, NULL, NULL, AB_PTR_ALL)
set_autobatch(OP_W, AB_ALIAS)     # batches read the weight itself and do their own products
