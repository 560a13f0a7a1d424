"""Emitting generated functions as readable, deterministic Python source, and
compiling them with the source registered in ``linecache`` so tracebacks and ``pdb``
show the generated lines.
"""

from __future__ import annotations

import ast
import hashlib
import linecache

import gast


class Comment(gast.stmt):
    """A ``# ...`` line in generated source (not executable)."""

    _fields = ("text",)

    def __init__(self, text: str = "") -> None:
        super().__init__()
        self.text = text


def comment(text: str) -> Comment:
    return Comment(" ".join(text.split()))


def render_function(definition: gast.FunctionDef) -> str:
    """The source of a generated function (one blank-line-free block)."""
    arguments = _unparse(definition.args)
    lines = [f"def {definition.name}({arguments}):"]
    if (
        definition.body
        and isinstance(definition.body[0], gast.Expr)
        and isinstance(getattr(definition.body[0], "value", None), gast.Constant)
    ):
        lines.append('    """' + definition.body[0].value.value + '"""')
        body = definition.body[1:]
    else:
        body = definition.body
    lines.extend(_block(body or [gast.Pass()], 1))
    return "\n".join(lines) + "\n"


def _block(body: list, depth: int) -> list[str]:
    pad = "    " * depth
    lines = []
    for statement in body:
        if isinstance(statement, Comment):
            lines.append(f"{pad}# {statement.text}")
        elif isinstance(statement, gast.If):
            lines.extend(_if(statement, depth, "if"))
        elif isinstance(statement, (gast.For, gast.While)):
            header = _unparse(_header_only(statement)).splitlines()[0]
            lines.append(pad + header)
            lines.extend(_block(statement.body or [gast.Pass()], depth + 1))
        else:
            text = _unparse(statement)
            lines.extend(pad + line for line in text.splitlines())
    return lines


def _unparse(node) -> str:
    tree = gast.gast_to_ast(node)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree)


def _header_only(statement):
    import copy

    shell = copy.copy(statement)
    shell.body = [gast.Pass()]
    shell.orelse = []
    return shell


def _if(statement: gast.If, depth: int, keyword: str) -> list[str]:
    pad = "    " * depth
    test = _unparse(statement.test)
    lines = [f"{pad}{keyword} {test}:"]
    lines.extend(_block(statement.body or [gast.Pass()], depth + 1))
    orelse = [s for s in statement.orelse]
    if len(orelse) == 1 and isinstance(orelse[0], gast.If):
        lines.extend(_if(orelse[0], depth, "elif"))
    elif orelse:
        lines.append(f"{pad}else:")
        lines.extend(_block(orelse, depth + 1))
    return lines


def compile_source(source: str, name: str, namespace: dict, label: str):
    """Compile generated ``source`` defining ``name`` into ``namespace``; the source is
    registered in linecache under a filename that names ``label``."""
    digest = hashlib.sha1(source.encode()).hexdigest()[:10]
    filename = f"<ppto generated: {label} {digest}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]
