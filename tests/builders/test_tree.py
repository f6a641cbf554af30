"""The tree builders against float64 numpy references of their equations
(weights copied with get_parameters / as_array), gradient checks, DyNet's
numbered API, batches of trees, dropout masks, update=False and errors."""

import numpy as np
import pytest

import dyn as dy

from . import _tree_ref as R

# (0 (1 2) 3 (4: 5 (6 7 8))): a node past N=2 children, inner nodes with and without input
TREE = [[1, 2], 3, (4, [5, [6, 7, 8]])]
SMALL = [0, (1, [2])]
V, D = 10, 4


def _model(seed=0, dim=D):
    dy.reset_random_seed(seed)
    m = dy.ParameterCollection()
    E = m.add_lookup_parameters((V, dim), init=np.random.RandomState(seed).randn(V, dim))
    return m, E


def _randomise(builder, seed=1):
    """Non-zero biases etc., so every term of the equations shows."""
    rng = np.random.RandomState(seed)
    for p in builder.param_collection().parameters_list():
        p.set_value(rng.uniform(-0.8, 0.8, size=p.shape()))


def _np_root(builder, E, tree):
    cls = type(builder).__name__
    ps = R.arrays(builder.get_parameters())
    H = builder.hidden_dim
    if cls == "NaryTreeLSTMBuilder":
        ln = None
        if builder.ln_lstm:
            names = ["gx", "bx", "gh", "bh", "gc", "bc"]
            ln = [{k: p[k].as_array() for k in names} for p in builder._params]
        cell = R.nary_cell(ps, builder.N, H, builder.forget_bias, builder.cell_terms, ln)
    elif cls == "ChildSumTreeLSTMBuilder":
        cell = R.child_sum_cell(ps, H, builder.forget_bias)
    elif cls == "TreeRNNBuilder":
        p = ps[0]
        cell = R.tree_rnn_cell(p[0], p[1], H, builder.N, p[2] if builder.input_dim else None)
        return R.np_encode(cell, E.as_array(), tree)
    else:
        cell = R.seq_tree_cell(ps, builder.forget_bias)
        return R.np_encode(cell, E.as_array(), tree)
    return R.np_encode(cell, E.as_array(), tree, builder.layers)


BUILDERS = {
    "nary": lambda m: dy.NaryTreeLSTMBuilder(2, 2, D, 3, m, forget_bias=0.5),
    "nary_n3": lambda m: dy.NaryTreeLSTMBuilder(3, 1, D, 3, m),
    "nary_cell_terms": lambda m: dy.NaryTreeLSTMBuilder(2, 2, D, 3, m, cell_terms=True),
    "nary_ln": lambda m: dy.NaryTreeLSTMBuilder(2, 1, D, 3, m, ln_lstm=True),
    "child_sum": lambda m: dy.ChildSumTreeLSTMBuilder(2, D, 3, m, forget_bias=0.3),
    "tree_rnn": lambda m: dy.TreeRNNBuilder(2, D, m),
    "tree_rnn_input": lambda m: dy.TreeRNNBuilder(3, 3, m, input_dim=D),
    "unidirectional": lambda m: dy.UnidirectionalTreeLSTMBuilder(2, D, D, m),
    "bidirectional": lambda m: dy.BidirectionalTreeLSTMBuilder(1, D, D, m),
}


def _pure_tree(name):
    """Figure 2's tree RNN takes no input at inner nodes."""
    return [[1, 2], 3, [5, [6, 7, 8]]] if name == "tree_rnn" else TREE


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_builder_matches_numpy_reference(name, float64):
    m, E = _model()
    b = BUILDERS[name](m)
    _randomise(b)
    tree = _pure_tree(name)
    root = R.dyn_encode(b, E, tree)
    want = _np_root(b, E, tree)
    np.testing.assert_allclose(root.output().npvalue(), want[-1][0], rtol=1e-10, atol=1e-12)
    if b._has_cell:  # s() = (c_1..c_L, h_1..h_L)
        s = root.s()
        L = len(want)
        for layer in range(L):
            np.testing.assert_allclose(s[layer].npvalue(), want[layer][1], rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(s[L + layer].npvalue(), want[layer][0], rtol=1e-10, atol=1e-12)
    assert len(root.children()) == 3 and root.b() is b


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_gradients_on_a_tiny_tree(name, float64):
    m, E = _model(dim=D)
    b = BUILDERS[name](m)
    _randomise(b, 2)
    tree = [0, [1, 2]] if name == "tree_rnn" else SMALL
    loss = dy.sum_elems(dy.square(R.dyn_encode(b, E, tree).output()))
    assert dy.check_grad(loss) == []


@pytest.mark.parametrize("name", ["nary", "child_sum", "tree_rnn_input", "bidirectional"])
def test_batch_of_trees_equals_one_tree_at_a_time(name, float64):
    m, E = _model()
    b = BUILDERS[name](m)
    _randomise(b, 3)
    batched = R.dyn_encode(b, E, TREE, batch=3).output().npvalue()
    assert batched.shape == (b.hidden_dim, 3)
    for k in range(3):
        dy.renew_cg()
        shifted = _shift(TREE, k)
        np.testing.assert_allclose(batched[:, k], R.dyn_encode(b, E, shifted).output().npvalue(), rtol=1e-12)


def _shift(t, k):
    w, kids = R.split(t)
    w = None if w is None else (w + k) % V
    if not kids:
        return w
    kids = [_shift(c, k) for c in kids]
    return kids if w is None else (w, kids)


def test_batched_and_unbatched_children_mix(float64):
    m, E = _model()
    b = dy.NaryTreeLSTMBuilder(2, 1, D, 3, m)
    left = b.add_input(dy.lookup_batch(E, [1, 2]))
    right = b.add_input(E[3])  # batch 1 broadcasts
    y = b.compose([left, right]).output().npvalue()
    for k, w in enumerate([1, 2]):
        dy.renew_cg()
        want = b.compose([b.add_input(E[w]), b.add_input(E[3])]).output().npvalue()
        np.testing.assert_allclose(y[:, k], want, rtol=1e-12)


def test_dynet_numbered_api_equals_compose(float64):
    m, E = _model()
    b = dy.NaryTreeLSTMBuilder(2, 2, D, 3, m)
    _randomise(b)
    # ids in order, children earlier: 0 = w1, 1 = w2, 2 = (0 1) with input w5, 3 = w3, 4 = (2 3 0)
    b.set_num_elements(5)
    b.start_new_sequence()
    hs = [b.add_input(0, [], E[1]), b.add_input(1, [], E[2])]
    hs.append(b.add_input(2, [0, 1], E[5]))
    hs.append(b.add_input(3, [], E[3]))
    root = b.add_input(4, [2, 3, 0], E[0])
    want = R.dyn_encode(b, E, (0, [(5, [1, 2]), 3, 1])).output().npvalue()
    np.testing.assert_allclose(root.npvalue(), want, rtol=1e-12)
    with pytest.raises(ValueError, match="in order"):
        b.add_input(7, [], E[1])
    with pytest.raises(ValueError, match="earlier nodes"):
        b.add_input(5, [5], E[1])
    dy.renew_cg()  # a new graph starts numbering again
    assert b.add_input(0, [], E[1]).dim() == ((3,), 1)


def test_dropout_masks_are_tied_and_follow_the_equations(float64):
    m, E = _model()
    b = dy.NaryTreeLSTMBuilder(2, 2, D, 3, m)
    _randomise(b)
    b.set_dropouts(0.4, 0.3)
    root = R.dyn_encode(b, E, TREE)
    masks = [(zx.npvalue(), zh.npvalue()) for zx, zh in b._cg.masks]  # one pair per layer, per graph
    assert set(np.unique(masks[0][0])) <= {0.0, 1 / 0.6} and np.all(masks[1][1][3:] == 1)  # c not dropped
    ps = R.arrays(b.get_parameters())
    cell = R.nary_cell(ps, 2, 3)

    def dropped(layer, x, kids):
        return cell(
            layer,
            x * masks[layer][0] if x is not None else None,
            [(h * masks[layer][1][:3], c) for h, c in kids],
        )

    want = R.np_encode(dropped, E.as_array(), TREE, 2)
    np.testing.assert_allclose(root.output().npvalue(), want[-1][0], rtol=1e-10)
    b.disable_dropout()
    dy.renew_cg()
    np.testing.assert_allclose(
        R.dyn_encode(b, E, TREE).output().npvalue(), _np_root(b, E, TREE)[-1][0], rtol=1e-10
    )


def test_batched_dropout_masks_are_per_element():
    m, E = _model()
    b = dy.ChildSumTreeLSTMBuilder(1, D, 3, m)
    b.set_dropout(0.5)
    b.set_dropout_masks(4)
    zx, zh = b._cg.masks[0]
    assert zx.dim() == ((D,), 4) and zh.dim() == ((6,), 4)
    assert R.dyn_encode(b, E, SMALL, batch=4).output().dim() == ((3,), 4)


@pytest.mark.parametrize("name", ["nary", "tree_rnn_input", "bidirectional"])
def test_update_false_leaves_the_parameters_alone(name):
    m, E = _model()
    b = BUILDERS[name](m)
    b.new_graph(update=False)
    loss = dy.sum_elems(R.dyn_encode(b, E, SMALL).output())
    loss.backward()
    assert all(not p.grad_as_array().any() for p in b.param_collection().parameters_list())
    dy.renew_cg()  # the next graph updates again
    dy.sum_elems(R.dyn_encode(b, E, SMALL).output()).backward()
    assert any(p.grad_as_array().any() for p in b.param_collection().parameters_list())


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_save_and_load_round_trip(name, tmp_path):
    m, E = _model()
    b = BUILDERS[name](m)
    _randomise(b, 4)
    tree = _pure_tree(name)
    want = R.dyn_encode(b, E, tree).output().npvalue()
    dy.save(str(tmp_path / "tree"), [b, E])
    b2, E2 = dy.load(str(tmp_path / "tree"), dy.ParameterCollection())
    assert type(b2) is type(b) and b2.spec == b.spec
    assert [p.name() for p in b2.param_collection().parameters_list()] == [
        p.name() for p in b.param_collection().parameters_list()
    ]
    for p, p2 in zip(b.param_collection().parameters_list(), b2.param_collection().parameters_list()):
        np.testing.assert_array_equal(p2.as_array(), p.as_array())  # the weights come back exactly
    dy.renew_cg()
    # the same tree through the same weights; the loaded weights sit at other addresses, and the
    # automatic batching engine's matrix products may then round differently in the last bit
    np.testing.assert_allclose(R.dyn_encode(b2, E2, tree).output().npvalue(), want, rtol=1e-6, atol=1e-7)


def test_parameters_and_expressions():
    m, _ = _model()
    b = dy.NaryTreeLSTMBuilder(2, 2, 5, 3, m, cell_terms=True)
    shapes = [[p.shape() for p in layer] for layer in b.get_parameters()]
    assert shapes == [[(15, 5), (15, 6), (15,), (12, 6)], [(15, 3), (15, 6), (15,), (12, 6)]]
    assert b.param_collection().name() == "/nary-tree-lstm-builder/"
    with pytest.raises(ValueError, match="in this graph first"):
        b.get_parameter_expressions()
    b.new_graph()
    assert [len(layer) for layer in b.get_parameter_expressions()] == [4, 4]
    assert [p.shape() for p in dy.ChildSumTreeLSTMBuilder(1, 5, 3, m).get_parameters()[0]] == [
        (12, 5),
        (12, 3),
        (12,),
    ]
    assert [p.shape() for p in dy.TreeRNNBuilder(2, 3, m, input_dim=5).get_parameters()[0]] == [
        (3, 6),
        (3,),
        (3, 5),
    ]
    assert len(dy.BidirectionalTreeLSTMBuilder(1, 4, 4, m).get_parameters()) == 2


@pytest.mark.parametrize("dropout", [0.0, 0.2], ids=["fused-path", "general-path"])
def test_errors(dropout):
    # without dropout a one-layer builder composes through _k.compose_fused, with it through
    # TreeBuilderBase's Python path: the same checks and messages
    m, E = _model()
    b = dy.NaryTreeLSTMBuilder(2, 1, D, 3, m)
    b.set_dropout(dropout)
    other = dy.ChildSumTreeLSTMBuilder(1, D, 3, m)
    with pytest.raises(TypeError, match="TreeStates of this builder"):
        b.compose([other.add_input(E[1])])
    with pytest.raises(TypeError, match="TreeStates of this builder"):
        b.compose([E[1]])
    with pytest.raises(ValueError, match="needs an input x or at least one child"):
        b.compose([])
    with pytest.raises(TypeError, match="x must be an Expression"):
        b.add_input(np.zeros(D))
    leaf = b.add_input(E[1])
    dy.renew_cg()
    with pytest.raises(ValueError, match="earlier computation graph"):
        b.compose([leaf])
    with pytest.raises(ValueError, match="input_dim .* must equal hidden_dim"):
        dy.BidirectionalTreeLSTMBuilder(1, 4, 6, m)
    with pytest.raises(ValueError, match="even"):
        dy.BidirectionalTreeLSTMBuilder(1, 5, 5, m)
    with pytest.raises(ValueError, match="cannot be combined"):
        dy.NaryTreeLSTMBuilder(2, 1, 4, 4, m, cell_terms=True, ln_lstm=True)
    rnn = dy.TreeRNNBuilder(2, 3, m)
    with pytest.raises(ValueError, match="a leaf's input is its h"):
        rnn.add_input(E[1])
    with pytest.raises(ValueError, match="dropout rate"):
        b.set_dropout(1.0)
    with pytest.raises(ValueError, match="no initial state"):
        b.start_new_sequence([E[1]])


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_builder_takes_dropout(name, float64):
    m, E = _model()
    b = BUILDERS[name](m)
    tree = _pure_tree(name)
    clean = R.dyn_encode(b, E, tree).output().npvalue()
    b.set_dropout(0.5)
    dy.renew_cg()
    loss = dy.sum_batches(dy.sum_elems(dy.square(R.dyn_encode(b, E, tree, batch=2).output())))
    loss.backward()  # (no finite differences: a recomputed graph draws new masks)
    assert all(np.isfinite(p.grad_as_array()).all() for p in b.param_collection().parameters_list())
    dy.renew_cg()
    assert not np.allclose(R.dyn_encode(b, E, tree).output().npvalue(), clean)
    b.disable_dropout()
    dy.renew_cg()
    np.testing.assert_allclose(R.dyn_encode(b, E, tree).output().npvalue(), clean, rtol=1e-12)
