"""Graph dumps (dump_cg, print_text_graphviz) name every node by the public operation that made
it, also where several operations share one kernel (tanh, logistic, ... are one `nonlin_unary`
kernel told apart by an attribute)."""

import pytest

import dyn as dy
from dyn._core import _expr, _graph
from dyn.ops._registry import REGISTRY

from . import _harness as H

# operations whose node is another registered operation's (an alias, a batched or biased
# variant of the same kernel, or one of the select/pick family): they show that one's name
SHOWN_AS_ANOTHER = {
    "*", "average", "concatenate_cols", "contract3d_1d_bias", "contract3d_1d_1d_bias", "flip_gradient",
    "scale_gradient", "hinge_batch", "lstm_step_dropout", "pick", "pick_batch", "pick_batch_elem",
    "pick_range", "pickrange", "pickneglogsoftmax_batch", "select_cols", "select_rows", "strided_select",
    "vanilla_lstm_gates_concat", "vanilla_lstm_gates_dropout", "vanilla_lstm_gates_dropout_concat",
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_a_node_shows_the_operation_that_made_it(name):
    spec = REGISTRY[name]
    case = spec.cases[0]
    dy.renew_cg()
    arrays, bds = H.make_arrays(spec, case, ("none", None), seed=0)
    _, y = H.build(spec, case, arrays, bds)
    nid = _expr.node_of(y)
    kernel, label = _graph.describe()[nid][0], _graph.describe(True)[nid][0]
    if name in SHOWN_AS_ANOTHER:
        assert label == kernel and label != name
    else:
        assert label == name, "%s: its node shows as %r (kernel %r)" % (name, label, kernel)


def test_dumps_use_the_names():
    x = dy.inputVector([1.0, 2.0])
    y = dy.cmult(dy.tanh(x), dy.sqrt(x))
    dy.l2_norm(y).value()
    assert [d[0] for d in _graph.describe(True)] == ["input", "tanh", "sqrt", "cmult", "l2_norm"]
    assert [d[0] for d in _graph.describe()][1:] == ["nonlin_unary", "math_unary", "cwise", "reduce_elems"]
