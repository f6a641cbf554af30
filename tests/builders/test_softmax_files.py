"""DyNet's cluster and tree files, Huffman trees and tree checks (the readers
of dyn/builders/_softmax_trees.py, through the builders)."""

import numpy as np
import pytest

import dyn as dy
from dyn.builders import _softmax_trees as trees

WORDS = ["the", "a", "dog", "cat", "runs", "sleeps", "unk"]
DIC = {w: i for i, w in enumerate(WORDS)}


def _write(tmp_path, text, name="clusters.txt", mode="w"):
    path = tmp_path / name
    if mode == "wb":
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


def test_class_file_is_read_as_dynet_reads_it(tmp_path, capsys):
    text = (
        "DET\tthe\t100\n"          # tab separated, extra field ignored
        "  NOUN   dog\n"           # leading blanks, several spaces
        "DET a 55 more fields\n"
        "VERB\t \truns\n"          # mixed blanks
        "NOUN cat\n"
        "0110\tsleeps\t3\r\n"      # a Brown bit string as a label; CR LF
    )  # fmt: skip
    cf = dy.ClassFactoredSoftmaxBuilder(3, _write(tmp_path, text), DIC, dy.ParameterCollection())
    assert cf.class_labels == ["DET", "NOUN", "VERB", "0110"]  # numbered by first appearance
    assert cf.class_words == [[0, 1], [2, 3], [4], [5]]  # sub-index = order within the class
    assert cf.word_class == [0, 0, 1, 1, 2, 3, -1] and cf.word_subindex[3] == 1
    err = capsys.readouterr().err
    assert "Reading clusters from" in err and "Read 6 words in 4 clusters (2 singleton clusters)" in err


def test_words_missing_from_the_file_have_no_class(tmp_path, float64):
    """As DyNet: allowed; probability 0, never sampled, neg_log_softmax raises."""
    path = _write(tmp_path, "x the\nx a\ny dog\n")
    cf = dy.ClassFactoredSoftmaxBuilder(3, path, WORDS, dy.ParameterCollection())
    e = dy.inputVector([0.5, -1.0, 2.0])
    full = cf.full_log_distribution(e).npvalue()
    assert np.all(np.isneginf(full[3:])) and np.isclose(np.exp(full).sum(), 1.0)
    with pytest.raises(ValueError, match="word id 4 has no class"):
        cf.neg_log_softmax(e, DIC["runs"])
    assert set(cf.sample(dy.inputTensor(np.ones((3, 200)), batched=True))) <= {0, 1, 2}


@pytest.mark.parametrize(
    "text, line, message",
    [
        ("DET the\nlonely\nNOUN dog\n", 2, "expected '<class> <word>'"),
        ("DET the\n\nNOUN dog\n", 2, "expected '<class> <word>'"),   # DyNet rejects blank lines too
        ("DET the\nNOUN wolf\n", 2, "'wolf' is not in the dictionary"),
        ("DET the\nNOUN dog\nVERB the\n", 3, "'the' is already on line 1"),
    ],
)  # fmt: skip
def test_bad_class_files_name_the_file_and_line(tmp_path, text, line, message):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError, match=message) as info:
        dy.ClassFactoredSoftmaxBuilder(3, path, DIC, dy.ParameterCollection())
    assert "%s, line %d" % (path, line) in str(info.value)


def test_other_bad_inputs(tmp_path):
    pc = dy.ParameterCollection()
    with pytest.raises(FileNotFoundError):
        dy.ClassFactoredSoftmaxBuilder(3, str(tmp_path / "nope.txt"), DIC, pc)
    with pytest.raises(ValueError, match="line 2: not UTF-8"):
        dy.ClassFactoredSoftmaxBuilder(3, _write(tmp_path, b"A the\nB \xff\xfe\n", mode="wb"), DIC, pc)
    with pytest.raises(ValueError, match="lists no words"):
        dy.ClassFactoredSoftmaxBuilder(3, _write(tmp_path, ""), DIC, pc)
    with pytest.raises(ValueError, match="unique ids from 0"):  # DyNet's message for a bad dic
        dy.ClassFactoredSoftmaxBuilder(3, _write(tmp_path, "A the\n"), {"the": 0, "a": 2}, pc)
    with pytest.raises(TypeError, match="dic"):
        dy.ClassFactoredSoftmaxBuilder(3, _write(tmp_path, "A the\n"), "the", pc)


def test_tree_file_dynet_format(tmp_path):
    """<symbol> <symbol> ...<TAB><word>: one path symbol per level."""
    text = "0 0\tthe\n0 1\ta\n1 0 0\tdog\n1 0 1\tcat\n1 1\truns\n1 1\tsleeps\n"
    hs = dy.HierarchicalSoftmaxBuilder(3, _write(tmp_path, text), DIC, dy.ParameterCollection())
    assert len(hs.nodes[0]) == 2 and all(o < 0 for o in hs.nodes[0])  # root -> clusters "0" and "1"
    paths = {w: [] for w in range(len(WORDS))}
    stack = [(0, [])]
    while stack:
        node, path = stack.pop()
        for branch, o in enumerate(hs.nodes[node]):
            if o >= 0:
                paths[o] = path + [branch]
            else:
                stack.append((~o, path + [branch]))
    # the/a sit alone in one-word clusters: the leaf decision is free
    assert paths[0] == [0, 0, 0] and paths[1] == [0, 1, 0]
    assert paths[2] == [1, 0, 0, 0] and paths[3] == [1, 0, 1, 0]
    assert paths[4] == [1, 1, 0] and paths[5] == [1, 1, 1]  # a two-word leaf cluster: one binary node
    assert paths[6] == []  # "unk" is not in the file


def test_brown_bitstrings_as_dynet_reads_them_and_split(tmp_path):
    text = "00\tthe\t9\n00\ta\t8\n01\tdog\t7\n1\tcat\t3\n1\truns\t2\n1\tsleeps\t1\n"
    path = _write(tmp_path, text)
    flat = dy.HierarchicalSoftmaxBuilder(3, path, DIC, dy.ParameterCollection())
    assert flat.nodes[0] == [~1, ~2, ~3]  # DyNet: "00" is one symbol: clusters, then words
    tree = dy.HierarchicalSoftmaxBuilder(3, path, DIC, dy.ParameterCollection(), bitstrings=True)
    assert len(tree.nodes[0]) == 2 and len(tree.nodes[~tree.nodes[0][0]]) == 2  # 0 -> {00, 01}
    assert sorted(len(outs) for outs in tree.nodes) == [1, 2, 2, 2, 3]


@pytest.mark.parametrize(
    "text, line",
    [("0 1 the\n", 1), ("0\tthe\n1 \n", 2), ("\n", 1), ("0 1 \tthe\n", 1), ("0\tthe\n1\tthe\n", 2)],
)
def test_bad_tree_files_name_the_file_and_line(tmp_path, text, line):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError) as info:
        dy.HierarchicalSoftmaxBuilder(3, path, DIC, dy.ParameterCollection())
    assert "%s, line %d" % (path, line) in str(info.value)


def test_huffman_tree():
    counts = [45, 13, 12, 16, 9, 5]  # the textbook example: code lengths 1, 3, 3, 3, 4, 4
    nodes = trees.huffman_tree(counts)
    _, _, paths = trees.check_tree(nodes, len(counts))
    assert [len(p) for p in paths] == [1, 3, 3, 3, 4, 4]
    assert all(len(outs) == 2 for outs in nodes) and len(nodes) == len(counts) - 1
    assert trees.huffman_tree([7]) == [[0]]
    assert trees.huffman_tree([0, 0, 0, 0]) == trees.huffman_tree([0, 0, 0, 0])  # deterministic
    for bad in ([], [1, -1], [1, float("nan")], [1, "2"]):
        with pytest.raises(ValueError):
            trees.huffman_tree(bad)


def test_tree_checks():
    assert trees.nested_tree([[0, 1], [2, [3, 4]]]) == [[~1, ~2], [0, 1], [2, ~3], [3, 4]]
    bad = [
        [[0, ~1], [~0]],           # a cycle through the root
        [[0, ~1], [1, ~1]],        # a node is its own child
        [[0, ~1, ~1], [1]],        # two parents
        [[0], [1]],                # node 1 unreachable
        [[0, 0]],                  # a word twice
        [[0, []]],                 # not a word id
        [[0], []],                 # a node without outputs
    ]  # fmt: skip
    for nodes in bad:
        with pytest.raises(ValueError):
            trees.check_tree(nodes)
    with pytest.raises(ValueError, match="out of range"):
        trees.check_tree([[0, 5]], num_words=3)
    with pytest.raises(TypeError):
        trees.nested_tree([0, "a"])
