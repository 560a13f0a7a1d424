"""ppto's fast tree walkers do what the standard library's do: ``trees.walk`` yields
``ast.walk``'s nodes in its order (and ``trees.nodes_by_kind`` lists each kind's
in that order), ``trees.Visitor`` visits ``ast.NodeVisitor``'s,
and ``trees.Transformer`` makes ``ast.NodeTransformer``'s trees (removing nodes and
putting lists in their place included), over the files the parser test reads; and
``expression_text`` writes what ``gast.unparse`` writes."""

import ast

import gast
import pytest

from ppto.transform import trees
from ppto.transform.names import names_in
from ppto.transform.resolve import expression_text
from ppto.transform.syntax import parse
from tests.test_syntax import FILES, SPECIAL_CASES, _equal


def _texts():
    for path in FILES[::3]:
        text = path.read_bytes().decode("utf-8", errors="replace")
        try:
            ast.parse(text)
        except SyntaxError:
            continue
        yield pytest.param(text, id=path.name)
    yield pytest.param(SPECIAL_CASES, id="special cases")


TEXTS = list(_texts())


@pytest.mark.parametrize("text", TEXTS)
def test_walk_is_ast_walk(text):
    for tree in (parse(text), ast.parse(text)):
        assert list(map(id, trees.walk(tree))) == list(map(id, ast.walk(tree)))


@pytest.mark.parametrize("text", TEXTS)
def test_nodes_by_kind_lists_each_kind_as_ast_walk_finds_it(text):
    tree = parse(text)
    found = trees.nodes_by_kind(tree)
    for kind in {type(node) for node in ast.walk(tree)} | {gast.Call, gast.Name}:
        expected = [id(node) for node in ast.walk(tree) if type(node) is kind]
        assert list(map(id, found.get(kind, ()))) == expected
    assert sum(map(len, found.values())) == sum(1 for _ in ast.walk(tree))


FUNCTION_NAMES_CASES = """
def f(x, scale=SCALE, *rest, k: Kind = (w := 2), **options) -> Result:
    y = x * scale
    for i in rest:
        y, z = y + i, k
    def inner(a=y):
        b = a
        return b
    return inner()
"""


@pytest.mark.parametrize("text", [*TEXTS, FUNCTION_NAMES_CASES])
def test_function_names_are_those_of_the_walks_they_replace(text):
    definitions = [
        node for node in ast.walk(parse(text)) if isinstance(node, gast.FunctionDef)
    ]
    assert definitions or text is not FUNCTION_NAMES_CASES
    for definition in definitions:
        expected = (
            trees.stores(definition),
            names_in(gast.Module(body=definition.body, type_ignores=[])),
            trees.stores(definition.body),
        )
        nodes = trees.nodes_by_kind(definition)
        assert trees.function_names(definition, nodes) == expected


def _visit_order(base, tree) -> list:
    seen = []

    class Recorder(base):
        def visit(self, node):
            seen.append(id(node))
            return base.visit(self, node)

        def visit_Call(self, node):  # a method of its own: generic_visit after it
            seen.append("call")
            self.generic_visit(node)

    Recorder().visit(tree)
    return seen


@pytest.mark.parametrize("text", TEXTS)
def test_visitor_visits_as_node_visitor(text):
    tree = parse(text)
    assert _visit_order(trees.Visitor, tree) == _visit_order(ast.NodeVisitor, tree)


def _leaf_visits(base, tree) -> list:
    seen = []

    class Recorder(base):
        def visit_Name(self, node):
            seen.append(node.id)
            self.generic_visit(node)

        def visit_Load(self, node):  # a leaf with a method: visited
            seen.append("load")

        def visit_Mult(self, node):
            seen.append("mult")

    Recorder().visit(tree)
    return seen


@pytest.mark.parametrize("text", TEXTS)
def test_visitor_visits_leaves_it_has_methods_for(text):
    tree = parse(text)
    assert _leaf_visits(trees.Visitor, tree) == _leaf_visits(ast.NodeVisitor, tree)


def test_leaves_without_methods_are_passed_over():
    class Plain(trees.Transformer):
        def visit_Name(self, node):
            return node

    class WithLoad(Plain):
        def visit_Load(self, node):
            return node

    class Observing(trees.Visitor):
        def visit(self, node):
            return super().visit(node)

    for leaf in (gast.Load, gast.Store, gast.Add, gast.USub, gast.Lt, gast.Constant):
        assert leaf in Plain._passed_over, leaf
    assert gast.Load not in WithLoad._passed_over
    assert gast.Store in WithLoad._passed_over
    assert not Observing._passed_over  # (its visit sees every node, as before)
    assert gast.Constant not in _constant_visitor()._passed_over


def _constant_visitor():
    class Constants(trees.Visitor):
        def visit_Num(self, node):  # (ast.NodeVisitor's visit_Constant calls it)
            pass

    return Constants


def _transformed(base, text):
    class Rewrite(base):
        def visit_Name(self, node):  # a replacement
            if isinstance(node.ctx, gast.Load):
                return gast.Constant(node.id, None)
            return node

        def visit_Pass(self, node):  # a removal
            return None

        def visit_Expr(self, node):  # a list in a statement's place
            self.generic_visit(node)
            return [node, gast.Pass()]

        def visit_Constant(self, node):  # removed from a list, or a field deleted
            return None if isinstance(node.value, int) else node

    return Rewrite().visit(parse(text))


@pytest.mark.parametrize("text", TEXTS)
def test_transformer_transforms_as_node_transformer(text):
    assert _equal(
        _transformed(trees.Transformer, text), _transformed(ast.NodeTransformer, text)
    )


@pytest.mark.parametrize(
    "text", ["np", "np.sum", "np.linalg.norm", "self.layer.forward", "f(x).g", "a[0].b"]
)
def test_expression_text_is_unparse(text):
    node = gast.parse(text).body[0].value
    assert expression_text(node) == gast.unparse(node).strip()


@pytest.mark.parametrize("text", TEXTS)
def test_clone_copies_every_node_but_contexts_and_operators(text):
    tree = parse(text)
    copied = trees.clone(tree)
    assert _equal(copied, tree)
    originals = {id(node) for node in trees.walk(tree)}
    for node in trees.walk(copied):
        shared = id(node) in originals
        assert shared == isinstance(node, SYMBOLS), node


SYMBOLS = (gast.expr_context, gast.operator, gast.unaryop, gast.cmpop, gast.boolop)


class _CopyingRenamer(trees.Transformer):
    """Renames every name, writing a copy (as inline's rule substitution does)."""

    def generic_visit(self, node):
        return super().generic_visit(trees.copied_node(node))

    def visit_Name(self, node):
        node = self.generic_visit(node)
        node.id = f"renamed_{node.id}"
        return node


@pytest.mark.parametrize("text", TEXTS[:4])
def test_a_transformer_over_copied_nodes_leaves_the_tree_as_it_was(text):
    tree = parse(text)
    before = ast.dump(gast.gast_to_ast(tree))
    renamed = _CopyingRenamer().visit(tree)
    assert ast.dump(gast.gast_to_ast(tree)) == before  # (the tree itself unchanged)
    names = [n for n in trees.walk(renamed) if isinstance(n, gast.Name)]
    assert names and all(n.id.startswith("renamed_") for n in names)
    originals = {id(node) for node in trees.walk(tree)}
    for node in trees.walk(renamed):  # nothing shared but contexts and operators
        assert (id(node) in originals) == isinstance(node, SYMBOLS), node


def _names_by_walking(tree, context) -> dict:
    """Each name's count in ``context`` (None: any), from ``ast.walk``'s nodes."""
    counts: dict = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Name, gast.Name)) and (
            context is None or type(node.ctx).__name__ == context
        ):
            counts[node.id] = counts.get(node.id, 0) + 1
    return counts


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("context", [None, "Load", "Store", "Del"])
def test_name_counts_count_what_a_walk_finds(text, context):
    # (parameters are names too in gast's trees; their annotations read names)
    for tree in (parse(text), ast.parse(text)):
        assert trees.name_counts(tree, context) == _names_by_walking(tree, context)
        statements = tree.body
        expected: dict = {}
        for statement in statements:
            for name, count in _names_by_walking(statement, context).items():
                expected[name] = expected.get(name, 0) + count
        assert trees.name_counts(statements, context) == expected


@pytest.mark.parametrize("text", ["x", "f(x=1)", "a.b[c] = d", "del e", "lambda y: y"])
def test_name_counts_of_small_trees(text):
    # (the root itself a name, or a tree with constants and contexts only around
    # names)
    for tree in (gast.parse(text), ast.parse(text)):
        for node in ast.walk(tree):
            for context in (None, "Load", "Store", "Del"):
                assert trees.name_counts(node, context) == _names_by_walking(
                    node, context
                )
