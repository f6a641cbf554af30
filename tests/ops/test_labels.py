"""Graph dumps (dump_cg, print_text_graphviz) name every node by the public operation that made
it, also where several operations share one kernel (tanh, logistic, ... are one `nonlin_unary`
kernel told apart by an attribute)."""

import pytest

import dyn as dy
from dyn._core.core import expr as _expr
from dyn._core.core import graph as _graph
from dyn.ops._registry import REGISTRY

from . import _harness as H

# operations whose node is another operation's (an alias, or a batched, biased or dropout variant
# of the same kernel attributes): the name it shows
SHOWN_AS = {
    "*": "matmul",
    "average": "scalar_affine",
    "contract3d_1d_bias": "contract3d_1d",
    "contract3d_1d_1d_bias": "contract3d_1d_1d",
    "flip_gradient": "gradient_scale",
    "scale_gradient": "gradient_scale",
    "hinge_batch": "hinge",
    "lstm_step_dropout": "lstm_step",
    "pickrange": "pick_range",
    "pickneglogsoftmax_batch": "pickneglogsoftmax",
    "vanilla_lstm_gates_concat": "vanilla_lstm_gates",
    "vanilla_lstm_gates_dropout": "vanilla_lstm_gates",
    "vanilla_lstm_gates_dropout_concat": "vanilla_lstm_gates",
}


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_a_node_shows_the_operation_that_made_it(name):
    spec = REGISTRY[name]
    case = spec.cases[0]
    dy.renew_cg()
    arrays, bds = H.make_arrays(spec, case, ("none", None), seed=0)
    _, y = H.build(spec, case, arrays, bds)
    nid = _expr.node_of(y)
    kernel, label = _graph.describe()[nid][0], _graph.describe(True)[nid][0]
    want = SHOWN_AS.get(name, name)
    assert label == want, "%s: its node shows as %r (kernel %r)" % (name, label, kernel)


def test_dumps_use_the_names():
    x = dy.inputVector([1.0, 2.0])
    y = dy.cmult(dy.tanh(x), dy.sqrt(x))
    dy.l2_norm(y).value()
    assert [d[0] for d in _graph.describe(True)] == ["input", "tanh", "sqrt", "cmult", "l2_norm"]
    assert [d[0] for d in _graph.describe()][1:] == ["nonlin_unary", "math_unary", "cwise", "reduce_elems"]
    dy.renew_cg()
    x = dy.inputVector([1.0, 2.0, 3.0])
    x[1], dy.pick_range(x, 0, 2), dy.concatenate_cols([x, x])
    assert [d[0] for d in _graph.describe(True)[1:]] == ["pick", "pick_range", "concatenate_cols"]
    assert {d[0] for d in _graph.describe()[1:]} == {"select", "concatenate"}
