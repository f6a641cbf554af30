"""Cluster files and trees for the softmax builders (dyn/builders/softmax.py).

DyNet's two file formats are read as its C++ readers read them
(cfsm-builder.cc and hsm-builder.cc), except that a bad file raises a
ValueError naming the file and the line instead of aborting the process:

* class file (ClassFactoredSoftmaxBuilder): one word per line,
  ``<class-label><ws><word>[<ws>anything]``, ``<ws>`` = spaces and tabs.
* tree file (HierarchicalSoftmaxBuilder): one word per line,
  ``<symbol>[ <symbol>...]<TAB><word>[<ws>anything]``: the path from the root,
  one symbol per level, symbols separated by spaces, then a tab.

A tree is kept flat: ``nodes[i]`` lists the outputs of node i in branch
order, each a word id (>= 0) or ``~j`` (= -j - 1) for child node j; node 0 is
the root. This form is what the builders' ``spec`` stores (no recursion, so a
deep tree saves and loads like a shallow one).
"""

import heapq
import math
import numbers
import re

_WS = " \t"


def _lines(path):
    """(line number, text) for every line of a UTF-8 text file.

    Like C++ getline: a final newline does not start an empty line; a
    Windows line end (CR LF) counts as a line end.
    """
    with open(path, "rb") as f:
        data = f.read()
    chunks = data.split(b"\n")
    if chunks and chunks[-1] == b"":
        chunks.pop()
    for n, raw in enumerate(chunks, 1):
        try:
            yield n, raw.rstrip(b"\r").decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("%s, line %d: not UTF-8 text" % (path, n)) from None


def word_ids(dic):
    """DyNet's ``dic``: a dict word -> id, a bijection onto 0..len(dic)-1
    (a list or tuple of words is taken as ids 0, 1, ...)."""
    if isinstance(dic, (list, tuple)):
        words = dic
        dic = {w: i for i, w in enumerate(words)}
        if len(dic) != len(words):
            raise ValueError("the word list has repeated words")
    if not isinstance(dic, dict):
        raise TypeError("dic must be a dict word -> id (or a list of words), got %s" % type(dic).__name__)
    for w in dic:
        if not isinstance(w, str):
            raise TypeError("dic keys must be str, got %r" % (w,))
    if sorted(dic.values()) != list(range(len(dic))):
        raise ValueError(
            "Dictionary should have unique ids from 0 to num_classes "
            "(the ids of dic are not 0..%d)" % (len(dic) - 1)
        )
    return dic


def _word(path, n, word, ids, seen):
    if word not in ids:
        raise ValueError("%s, line %d: the word %r is not in the dictionary" % (path, n, word))
    w = ids[word]
    if w in seen:
        raise ValueError("%s, line %d: the word %r is already on line %d" % (path, n, word, seen[w]))
    seen[w] = n
    return w


def read_class_file(path, dic):
    """Read a class file: (labels, class_words, num_words).

    Classes are numbered in order of first appearance; class_words[c] lists
    the ids of its words in file order (a word's position is its sub-index).
    """
    ids = word_ids(dic)
    labels, index, class_words, seen = [], {}, [], {}
    for n, line in _lines(path):
        fields = [f for f in re.split(r"[ \t]+", line) if f]
        if len(fields) < 2:
            raise ValueError(
                "%s, line %d: expected '<class> <word>' (separated by spaces or tabs), got %r"
                % (path, n, line)
            )
        w = _word(path, n, fields[1], ids, seen)
        c = index.setdefault(fields[0], len(labels))
        if c == len(labels):
            labels.append(fields[0])
            class_words.append([])
        class_words[c].append(w)
    if not labels:
        raise ValueError("%s: the cluster file lists no words" % path)
    return labels, class_words, len(ids)


def _tree_fields(line):
    """DyNet's hsm reader: (path symbols, word) or None on a format error."""
    n, start, end, path = len(line), 0, 0, []
    while start < n:
        while start < n and line[start] in _WS:
            start += 1
        end = start
        while end < n and line[end] not in _WS:
            end += 1
        path.append(line[start:end])
        if end < n and line[end] == " ":
            start = end + 1
            continue
        break
    startw = end
    while startw < n and line[startw] in _WS:
        startw += 1
    endw = startw
    while endw < n and line[endw] not in _WS:
        endw += 1
    if end <= start or startw <= end or endw <= startw:
        return None
    return path, line[startw:endw]


def read_tree_file(path, dic, bitstrings=False):
    """Read a tree file: (nodes, num_words), nodes in the flat form above.

    A node's branches are its child nodes and words in order of first
    appearance in the file (DyNet allows no words beside child nodes; dyn does).
    With ``bitstrings`` each character of a symbol is one level (a Brown
    cluster bit string "0110" is the path 0, 1, 1, 0).
    """
    ids = word_ids(dic)
    nodes, children, seen = [[]], [{}], {}
    for n, line in _lines(path):
        fields = _tree_fields(line)
        if fields is None:
            raise ValueError(
                "%s, line %d: expected '<path symbols separated by spaces><TAB><word>', got %r"
                % (path, n, line)
            )
        symbols, word = fields
        if bitstrings:
            symbols = [ch for s in symbols for ch in s]
        node = 0
        for s in symbols:
            j = children[node].get(s)
            if j is None:
                j = children[node][s] = len(nodes)
                nodes.append([])
                children.append({})
                nodes[node].append(~j)
            node = j
        nodes[node].append(_word(path, n, word, ids, seen))
    if not seen:
        raise ValueError("%s: the tree file lists no words" % path)
    return nodes, len(ids)


def huffman_tree(counts):
    """A binary Huffman tree over words 0..len(counts)-1: frequent words get
    short paths. Branch 0 of a node is its lighter subtree; ties go to the
    lower word id (then the older subtree), so the tree is deterministic."""
    counts = list(counts)
    if not counts:
        raise ValueError("huffman_tree: counts is empty")
    for w, c in enumerate(counts):
        if isinstance(c, bool) or not isinstance(c, numbers.Real) or not math.isfinite(c) or c < 0:
            raise ValueError("huffman_tree: counts[%d] = %r is not a finite number >= 0" % (w, c))
    if len(counts) == 1:
        return [[0]]
    heap = [(float(c), w, w) for w, c in enumerate(counts)]
    heapq.heapify(heap)
    total = len(counts) - 1  # internal nodes; the last one made is the root, node 0
    nodes = [None] * total
    for k in range(total):
        c0, _, a = heapq.heappop(heap)
        c1, _, b = heapq.heappop(heap)
        node = total - 1 - k
        nodes[node] = [a, b]
        heapq.heappush(heap, (c0 + c1, len(counts) + k, ~node))
    return nodes


def nested_tree(tree):
    """Flat nodes from nested lists: ``[[0, 1], [2, [3, 4]]]`` is a root with
    two subtrees; an int is a word. Built without recursion."""
    if not isinstance(tree, (list, tuple)):
        raise TypeError("a tree must be a (nested) list of word ids, got %r" % (tree,))
    nodes, queue = [None], [(tree, 0)]
    for sub, node in queue:  # the queue grows while it is read: breadth first
        outs = []
        for item in sub:
            if isinstance(item, (list, tuple)):
                outs.append(~len(nodes))
                queue.append((item, len(nodes)))
                nodes.append(None)
            elif isinstance(item, numbers.Integral) and not isinstance(item, bool):
                outs.append(int(item))
            else:
                raise TypeError("a tree holds word ids (ints) and lists, got %r" % (item,))
        nodes[node] = outs
    return nodes


def check_tree(nodes, num_words=None):
    """Validate flat nodes; returns (nodes, num_words, paths).

    paths[w] lists the (node, branch) pairs from the root to word w, or is
    None for a word the tree does not hold. Raises ValueError for anything
    that is not a tree over distinct words in range.
    """
    if not isinstance(nodes, (list, tuple)) or not nodes:
        raise ValueError("a tree needs at least one node")
    nodes = [list(outs) for outs in nodes]
    words = [o for outs in nodes for o in outs if isinstance(o, numbers.Integral) and o >= 0]
    if num_words is None:
        num_words = max(words, default=-1) + 1
    parent = [None] * len(nodes)
    for i, outs in enumerate(nodes):
        if not outs:
            raise ValueError("tree node %d has no outputs" % i)
        for o in outs:
            if isinstance(o, bool) or not isinstance(o, numbers.Integral):
                raise ValueError("tree node %d: %r is neither a word id nor a node" % (i, o))
            if o >= num_words:
                raise ValueError("tree node %d: word id %d is out of range (%d words)" % (i, o, num_words))
            if o < 0:
                j = ~o
                if j <= 0 or j >= len(nodes) or parent[j] is not None:
                    raise ValueError(
                        "tree node %d: child %d is the root, out of range or has two parents" % (i, j)
                    )
                parent[j] = i
    paths = [None] * num_words
    stack, visited = [(0, [])], 0
    while stack:
        node, path = stack.pop()
        visited += 1
        for branch, o in enumerate(nodes[node]):
            step = path + [(node, branch)]
            if o >= 0:
                if paths[o] is not None:
                    raise ValueError("the word id %d is in the tree twice" % o)
                paths[o] = step
            else:
                stack.append((~o, step))
    if visited != len(nodes):
        raise ValueError("%d tree nodes cannot be reached from the root (node 0)" % (len(nodes) - visited))
    return nodes, num_words, paths
