"""DyNet's text model format: populate reads files
written by DyNet, and save(format="text") writes files DyNet can read."""

import re

import numpy as np
import pytest

import dyn as dy
from dyn.io import ModelFileError

# As DyNet writes it: values column-major, "%+.8e" with a trailing space,
# lookup dims with the rows last, a gradient line after FULL_GRAD.
DYNET_FILE = """\
#Parameter# /W {2,3} 97 ZERO_GRAD
+1.00000000e+00 +2.00000000e+00 +3.00000000e+00 +4.00000000e+00 +5.00000000e+00 +6.00000000e+00 
#Parameter# /_0 {2} 66 FULL_GRAD
+5.00000000e-01 -5.00000000e-01 
+1.00000000e-01 +2.00000000e-01 
#LookupParameter# /E {2,3} 97 ZERO_GRAD
+1.00000000e+00 +2.00000000e+00 +3.00000000e+00 +4.00000000e+00 +5.00000000e+00 +6.00000000e+00 
"""  # noqa: W291


def _target():
    m = dy.ParameterCollection()
    return m, m.add_parameters((2, 3)), m.add_parameters(2), m.add_lookup_parameters((3, 2))


def test_populate_reads_a_dynet_file(tmp_path):
    path = tmp_path / "dynet.model"
    path.write_text(DYNET_FILE)
    m, W, b, E = _target()
    m.populate(path)
    np.testing.assert_array_equal(W.as_array(), [[1, 3, 5], [2, 4, 6]])  # column-major
    np.testing.assert_array_equal(b.as_array(), [0.5, -0.5])
    np.testing.assert_allclose(b.grad_as_array(), [0.1, 0.2], rtol=1e-7)
    np.testing.assert_array_equal(E.as_array(), [[1, 2], [3, 4], [5, 6]])  # row i = values 2i, 2i+1
    np.testing.assert_array_equal(E.row_as_array(2), [5, 6])
    # single parameters by exact name, and new ones made from the file
    W.set_value(np.zeros((2, 3)))
    W.populate(path, "/W")
    np.testing.assert_array_equal(W.as_array(), [[1, 3, 5], [2, 4, 6]])
    E2 = dy.ParameterCollection().load_lookup_param(path, "/E")
    assert E2.name() == "/E" and E2.shape() == (3, 2)
    # a dim that does not match changes nothing
    m3 = dy.ParameterCollection()
    W3, b3, E3 = m3.add_parameters((3, 2)), m3.add_parameters(2), m3.add_lookup_parameters((3, 2))
    before = [W3.as_array(), b3.as_array(), E3.as_array()]
    with pytest.raises(ModelFileError, match=r"parameter /W of dim \(2, 3\) does not fit"):
        m3.populate(path)
    for p, v in zip([W3, b3, E3], before):
        np.testing.assert_array_equal(p.as_array(), v)


def test_populate_key_and_empty_file(tmp_path):
    path = tmp_path / "dynet.model"
    path.write_text(DYNET_FILE.replace("/E ", "/emb/E "))
    m = dy.ParameterCollection()
    E = m.add_lookup_parameters((3, 2))
    m.populate(path, "/emb")
    np.testing.assert_array_equal(E.as_array(), [[1, 2], [3, 4], [5, 6]])
    (tmp_path / "empty.model").write_text("")  # DyNet's file for an empty collection
    dy.ParameterCollection().populate(tmp_path / "empty.model")


@pytest.mark.parametrize(
    "text, message",
    [
        ("#Parameter# /W {2,3} 97 ZERO_GRAD\n1 2 3\n", "line 2: 3 numbers for the values of /W, expected 6"),
        ("#Parameter# /W {2} 97 ZERO_GRAD\n1 x\n", "line 2: bad number in the values of /W"),
        ("#Parameter# /W {2} 97 FULL_GRAD\n1 2\n", "line 3: 0 numbers for the gradient of /W"),
        ("#Parameter# /W {2} 97 FULL_GRAD\n1 2", "ends before the gradient of /W"),
        ("#Parameter# /W {2} 97 ZERO_GRAD", "ends before the values of /W"),
        ("#Parameter# /W {2}X4 97 ZERO_GRAD\n1 2\n", "line 1: bad dim for /W"),
        ("#LookupParameter# /E {6} 97 ZERO_GRAD\n1 2 3 4 5 6\n", "line 1: bad dim for /E"),
        ("#Parameter# /W {2,0} 1 ZERO_GRAD\n\n", "line 1: bad dim"),
        ("#Parameter# /W {2} 97 ZERO_GRAD\n1 2\ngarbage here\n", "line 3: expected a '#Parameter#'"),
        ("#Tensor# /W {2} 97 ZERO_GRAD\n1 2\n", "line 1: expected a '#Parameter#'"),
    ],
)
def test_malformed_text_files_name_file_and_line(tmp_path, text, message):
    path = tmp_path / "bad.model"
    path.write_text(text)
    m = dy.ParameterCollection()
    W = m.add_parameters(2, init=7.0)
    with pytest.raises(ModelFileError, match=message) as err:
        m.populate(path)
    assert str(path) in str(err.value)
    assert (W.as_array() == 7.0).all()


def test_non_utf8_text_is_rejected(tmp_path):
    (tmp_path / "bad.model").write_bytes(b"#Parameter# /\xff {2} 1 ZERO_GRAD\n1 2\n")
    with pytest.raises(ModelFileError, match="not a text model file"):
        dy.ParameterCollection().populate(tmp_path / "bad.model")


def test_save_in_dynet_text_format_round_trips(tmp_path):
    rng = np.random.RandomState(0)
    m = dy.ParameterCollection()
    W = m.add_parameters((3, 4), init=rng.randn(3, 4))
    E = m.add_lookup_parameters((5, 2, 2), init=rng.randn(5, 2, 2), name="E")
    dy.sum_elems(W * dy.inputVector([1.0, 2.0, 3.0, 4.0])).backward()
    path = tmp_path / "m.txt"
    m.save(path, format="text", gradients=True)
    lines = path.read_text().split("\n")
    assert lines[0] == "#Parameter# /_0 {3,4} %d FULL_GRAD" % (len(lines[1]) + len(lines[2]) + 2)
    assert re.fullmatch(r"#LookupParameter# /E \{2,2,5\} \d+ FULL_GRAD", lines[3])
    assert lines[1].split()[1] == "%+.8e" % W.as_array()[1, 0]  # column-major, DyNet's number format
    m2 = dy.ParameterCollection()
    W2, E2 = m2.add_parameters((3, 4)), m2.add_lookup_parameters((5, 2, 2))
    m2.populate(path)
    # 9 significant digits round-trip float32 exactly
    np.testing.assert_array_equal(W2.as_array(), W.as_array())
    np.testing.assert_array_equal(E2.as_array(), E.as_array())
    np.testing.assert_array_equal(W2.grad_as_array(), W.grad_as_array())
    # a single parameter, appended; and a safetensors file converted to text by appending
    W.save(path, key="/copy", append=True, format="text")
    assert path.read_text().count("#Parameter#") == 2
    W.save(tmp_path / "m.st")
    E.save(tmp_path / "m.st", append=True, format="text")
    assert (tmp_path / "m.st").read_text().startswith("#Parameter# /_0 {3,4}")
