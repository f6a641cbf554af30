"""Display of expressions, graphs, collections and trainers (dyn/display.py).

The key promise: displaying never runs forward or backward.
"""

import re
import shutil
import sys

import numpy as np
import pytest

import dyn as dy
from dyn import display
from dyn._core.core import autobatch as _autobatch
from dyn._core.core import expr as _expr


def _computed():
    return _expr.graph_state()[1]


def _small_graph():
    pc = dy.ParameterCollection()
    W = pc.add_parameters((3, 2), name="W")
    dy.renew_cg()
    x = dy.inputVector([1.0, 2.0])
    h = dy.tanh(W * x)
    loss = dy.sum_elems(h)
    return pc, W, x, h, loss


def test_repr_names_op_and_dim_and_never_computes():
    _pc, _W, _x, h, loss = _small_graph()
    assert re.fullmatch(r"expression \d+/\d+: tanh\(N\d+\) \{3\} \(not computed\)", repr(h)), repr(h)
    text = display.to_text(values=True, gradients=True)
    assert "matmul" in text and "not computed" in text
    assert "tanh" in dy.render(loss, values=True, gradients=True).source
    h._repr_html_()
    assert _computed() == 0  # nothing ran
    h.forward()
    assert repr(h).endswith("= " + display.summary(h.npvalue()))
    assert "(not computed)" in repr(loss)


def test_values_only_for_computed_nodes_and_gradients_after_backward():
    _pc, _W, _x, h, loss = _small_graph()
    h.forward()
    n_before = _computed()
    src = dy.render(loss, values=True, gradients=True).source
    assert _computed() == n_before  # loss is still not computed
    nid_h, nid_loss = _expr.node_of(h), _expr.node_of(loss)
    line_h = [s for s in src.splitlines() if s.startswith("  N%d [" % nid_h)][0]
    line_loss = [s for s in src.splitlines() if s.startswith("  N%d [" % nid_loss)][0]
    assert "value " + display.summary(h.npvalue()) in line_h and "grad" not in line_h
    assert "value" not in line_loss and "dashed" in line_loss
    loss.backward()
    src = dy.render(loss, values=True, gradients=True).source
    line_h = [s for s in src.splitlines() if s.startswith("  N%d [" % nid_h)][0]
    assert "grad " + display.summary(h.gradient()) in line_h
    assert "N%d -> N%d;" % (nid_h, nid_loss) in src


def test_ancestors_only_and_max_nodes():
    dy.renew_cg()
    a = dy.inputVector([1.0])
    unrelated = dy.exp(a)
    chain = a
    for _ in range(10):
        chain = dy.tanh(chain)
    src = display.to_dot([chain])
    assert "N%d " % _expr.node_of(unrelated) not in src
    src = display.to_dot([chain], max_nodes=4)
    assert src.count('label="N') == 4 and "7 earlier nodes not shown" in src


def test_autobatched_graph_colours_each_batch():
    pc = dy.ParameterCollection()
    W = pc.add_parameters((4, 3))
    dy.renew_cg(autobatching=True)
    outs = [dy.tanh(W * dy.inputVector(np.arange(3.0) + k)) for k in range(3)]
    total = dy.esum(outs)
    total.forward()
    batches = [b for b in _autobatch.batches() if len(b) > 1]
    assert batches
    src = display.to_dot([total])
    for members in batches:
        colours = {
            re.search(r'fillcolor="([^"]+)"', s).group(1)
            for s in src.splitlines()
            if any(s.startswith("  N%d [" % i) for i in members)
        }
        assert len(colours) == 1 and colours != {"white"}
    assert "colour: batch of the autobatching engine" in src
    assert "fillcolor" not in display.to_dot([total], batches=False).split("];", 1)[1]


def test_stale_expression_repr_does_not_raise():
    _pc, _W, _x, h, _loss = _small_graph()
    dy.renew_cg()
    assert "stale" in repr(h)
    assert h._repr_svg_() is None


def test_svg_with_graphviz():
    # the graphviz package is used when installed, else the dot program directly: dot is what draws
    if shutil.which("dot") is None:
        pytest.skip("the graphviz 'dot' program is not installed")
    _pc, _W, _x, h, loss = _small_graph()
    loss.forward()
    loss.backward()
    svg = dy.render(loss, values=True, gradients=True)._repr_svg_()
    assert "<svg" in svg and "tanh" in svg and "matmul" in svg
    assert "<svg" in h._repr_svg_() and "<svg" in h._repr_html_()
    chain = dy.inputVector([1.0])
    for _ in range(display.INLINE_NODES + 1):
        chain = dy.tanh(chain)
    assert chain._repr_svg_() is None  # too big to draw inline: dy.render draws it
    assert "<svg" not in chain._repr_html_() and "tanh" in chain._repr_html_()


def test_without_graphviz_the_text_form_shows(monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    _pc, _W, _x, _h, loss = _small_graph()
    r = dy.render(loss)
    assert r._repr_svg_() is None and "sum_elems" in repr(r)
    with pytest.raises(RuntimeError, match="graphviz is not installed"):
        r.svg()


def test_render_save_is_atomic_text(tmp_path):
    _pc, _W, _x, _h, loss = _small_graph()
    path = tmp_path / "g.dot"
    dy.render(loss).save(str(path))
    assert path.read_text().startswith("digraph G {")
    assert [p.name for p in tmp_path.iterdir()] == ["g.dot"]


def test_collection_table_and_trainer_settings():
    pc = dy.ParameterCollection()
    W = pc.add_parameters((3, 2), name="W")
    E = pc.add_lookup_parameters((5, 4), name="E")
    rows = display.parameter_rows(pc)
    assert [(r["name"], r["shape"], r["count"]) for r in rows] == [("/W", (3, 2), 6), ("/E", (5, 4), 20)]
    assert rows[1]["norm"] == pytest.approx(np.linalg.norm(E.as_array()), rel=1e-6)
    assert rows[0]["grad_norm"] == 0.0
    html = pc._repr_html_()
    assert "<table>" in html and "/E" in html and "(5, 4)" in html
    assert "/W" in repr(pc) and "2 parameters, 26 values" in repr(pc)
    t = dy.AdamTrainer(pc, 0.01, beta_1=0.8)
    t.set_clip_threshold(2.0)
    s = t.settings()
    assert s["learning_rate"] == 0.01 and s["clip_threshold"] == 2.0 and s["beta_1"] == 0.8
    assert "AdamTrainer" in t._repr_html_() and "beta_1=0.8" in repr(t)
    assert W._repr_svg_() is None and "/W" in W._repr_html_()


def _line(text, nid):
    return [s for s in text.splitlines() if s.startswith("N%d = " % nid)][0]


def test_graphs_name_the_parameters_the_user_named():
    pc = dy.ParameterCollection()
    W, b = pc.add_parameters((3, 2), name="W"), pc.add_parameters(3, name="b")
    E = pc.add_lookup_parameters((5, 3), name="E")
    U = pc.add_parameters((3, 3))  # no name: dyn calls it /_0, the graph shows none
    W_enc = pc.add_subcollection("enc").add_parameters((3, 2), name="W")
    dy.renew_cg()
    x = dy.inputVector([1.0, 2.0])
    Wx, Ex, Ux = W * x, E[1], dy.parameter(U) * dy.inputVector([1.0, 2.0, 3.0])
    h = dy.tanh(Wx + b + Ex + Ux + W_enc * x + dy.lookup_batch(E, [1, 2]))
    text = dy.render(h).text
    node = {e: _expr.node_of(e) for e in (Wx, Ex, Ux)}
    assert _line(text, _expr.node_of(Wx) - 1).startswith("N%d = parameter(W)  {3,2}" % (node[Wx] - 1))
    assert "= parameter(b)  {3}" in text and "= parameter(enc/W)  {3,2}" in text
    assert _line(text, node[Ex]).startswith("N%d = lookup(E)  {3}" % node[Ex])
    assert "= lookup_batch(E)  {3}x2" in text
    assert _line(text, node[Ux] - 1).startswith("N%d = parameter()  {3,3}" % (node[Ux] - 1))
    assert 'label="N%d = parameter(W)\\n{3,2}"' % (node[Wx] - 1) in dy.render(h).source


def test_nodes_of_two_tables_of_one_shape_are_named_exactly():
    pc = dy.ParameterCollection()
    A = pc.add_lookup_parameters((4, 2), name="A")
    B = pc.add_lookup_parameters((4, 2), name="B")
    W = pc.add_parameters((2, 2), name="W")
    V = pc.add_parameters((2, 2), name="V")
    dy.renew_cg()
    # same shapes, interleaved uses: every node is named by the parameter it reads
    nodes = [
        (A[0], "lookup(A)"),
        (B[1], "lookup(B)"),
        (A[2], "lookup(A)"),
        (dy.parameter(V), "parameter(V)"),
        (dy.parameter(W), "parameter(W)"),
        (dy.lookup_batch(B, [0, 3]), "lookup_batch(B)"),
    ]
    dy.esum([dy.sum_elems(e) for e, _ in nodes])  # (a parameter's node is made where it is used)
    text = display.to_text()
    for e, shown in nodes:
        assert _line(text, _expr.node_of(e)).startswith("N%d = %s" % (_expr.node_of(e), shown))
