"""Parsing Python source into gast trees: ``parse`` is ``gast.parse`` and ``to_gast``
is ``gast.ast_to_gast``, node for node the same trees, in less time.

Every transformation parses the user's function and, the first time a process uses
an operator, the source of its gradient rule; gast converts Python's ``ast`` tree with
a generic visitor that looks up each node's conversion by name and builds each node
through keyword arguments, which takes longer than parsing itself. ``_Converter`` is
gast's own converter (its per-node special cases, which differ between Python
versions, are inherited unchanged) with a faster generic path: each node class's gast
class, fields and special case are looked up once, and fields are copied straight
from the node. Names, the most common nodes, take a direct path that builds what
gast's ``visit_Name`` builds. A test compares both converters' trees, positions
included, over every Python file of ppto and its tests and every eighth module of
the standard library (all of it agreed too, when compared once).
"""

from __future__ import annotations

import ast

import gast
from gast.ast3 import Ast3ToGAst

_UNSET = object()
_LOCATION = ("lineno", "col_offset", "end_lineno", "end_col_offset")


def parse(text: str):
    """``gast.parse(text)``."""
    return _Converter().visit(ast.parse(text))


def to_gast(node):
    """``gast.ast_to_gast(node)``."""
    return _Converter().visit(node)


class _Converter(Ast3ToGAst):
    def visit(self, node):
        kind = type(node)
        special = _SPECIAL.get(kind, _UNSET)
        if special is _UNSET:
            special = _SPECIAL[kind] = _special_case(kind)
        if special is not None:
            return special(self, node)
        return self.generic_visit(node)

    def _visit(self, node):
        if isinstance(node, ast.AST):
            return self.visit(node)
        if isinstance(node, list):
            return [self._visit(item) for item in node]
        return node

    def generic_visit(self, node):
        """A node of the gast class of the same name with every field the node has
        converted and its position copied (what gast's generic conversion does)."""
        kind = type(node)
        plan = _PLANS.get(kind)
        if plan is None:
            plan = _PLANS[kind] = _plan(kind)
        target, fields, attributes = plan
        if target is None:
            return None  # not a node of the syntax tree: gast drops it too
        original = node.__dict__
        values = {}
        for field in fields:
            if field in original:
                value = original[field]
            elif hasattr(node, field):
                value = getattr(node, field)
            else:
                continue
            if isinstance(value, ast.AST):
                value = self.visit(value)
            elif type(value) is list:
                value = [self._visit(item) for item in value]
            values[field] = value
        for attribute in attributes:
            if attribute in original:
                values[attribute] = original[attribute]
            elif hasattr(node, attribute):  # a class default (end_lineno: None)
                values[attribute] = getattr(node, attribute)
        converted = target.__new__(target)
        converted.__dict__.update(values)
        return converted

    def _name(self, node):
        """gast's ``visit_Name``: ``gast.Name(id, ctx, None, None)`` at the node's
        position."""
        converted = gast.Name.__new__(gast.Name)
        context = _CONTEXTS[type(node.ctx)]
        converted.__dict__.update(  # (a context has no fields: __new__ is all of it)
            id=node.id, ctx=context.__new__(context), annotation=None, type_comment=None
        )
        original = node.__dict__
        for attribute in _LOCATION:  # ast.copy_location
            value = original.get(attribute)
            if value is not None or (attribute in original and attribute[0] == "e"):
                converted.__dict__[attribute] = value
        return converted


_CONTEXTS = {ast.Load: gast.Load, ast.Store: gast.Store, ast.Del: gast.Del}
_SPECIAL: dict = {}  # ast class -> gast's special case for it, or None
_PLANS: dict = {}  # ast class -> (gast class, fields, attributes)


def _special_case(kind):
    """gast's own conversion method for ``kind`` (None: the generic one)."""
    name = f"visit_{kind.__name__}"
    for klass in Ast3ToGAst.__mro__:
        if klass in (ast.NodeTransformer, ast.NodeVisitor, object):
            break
        if name in klass.__dict__:
            method = klass.__dict__[name]
            if kind is ast.Name and method is _GAST_NAME:
                return _Converter._name
            return method
    return None


def _plan(kind) -> tuple:
    target = getattr(gast, kind.__name__, None)
    if target is None:
        return None, (), ()
    return target, tuple(kind._fields), tuple(kind._attributes)


_GAST_NAME = Ast3ToGAst.__dict__.get("visit_Name")
