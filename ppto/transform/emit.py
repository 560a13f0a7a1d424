"""Emitting generated functions as readable, deterministic Python source, and
compiling them with the source registered in ``linecache`` so tracebacks and ``pdb``
show the generated lines, and each line's origin (the user's line, see origins.py)
kept beside the code so that an error raised there can name the user's line.
"""

from __future__ import annotations

import ast
import hashlib
import linecache
import os

import gast
import numpy

from ppto.transform.origins import ATTRIBUTE, register
from ppto.transform.origins import at as origin_at


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
    return rendered(definition)[0]


def rendered(definition: gast.FunctionDef) -> tuple[str, list]:
    """``(the source of a generated function, the origins of each of its lines)``:
    what ``origins.at`` reads when the function fails (None for a line with none)."""
    arguments = _unparse(definition.args)
    lines, table = [f"def {definition.name}({arguments}):"], [None]
    if (
        definition.body
        and isinstance(definition.body[0], gast.Expr)
        and isinstance(getattr(definition.body[0], "value", None), gast.Constant)
    ):
        lines.append('    """' + definition.body[0].value.value + '"""')
        table.append(None)
        body = definition.body[1:]
    else:
        body = definition.body
    _block(body or [gast.Pass()], 1, lines, table)
    return "\n".join(lines) + "\n", table


def rendered_functions(definitions: list) -> tuple[str, list]:
    """``rendered`` for several functions, two blank lines apart."""
    parts = [rendered(definition) for definition in definitions]
    table = []
    for _, lines in parts:
        if table:
            table += [None, None]  # the blank lines between two functions
        table += lines
    return "\n\n".join(text for text, _ in parts), table


def _block(body: list, depth: int, lines: list, table: list) -> None:
    """Append the lines of ``body`` to ``lines`` and their origins to ``table``."""
    pad = "    " * depth
    if all(isinstance(statement, Comment) for statement in body):
        # comments alone are no block (a branch whose statements were all found
        # unused and removed keeps its "grad of" line)
        body = [*body, gast.Pass()]
    for statement in body:
        origin = statement.__dict__.get(ATTRIBUTE)
        if isinstance(statement, Comment):
            lines.append(f"{pad}# {statement.text}")
            table.append(None)
        elif isinstance(statement, gast.If):
            _if(statement, depth, "if", lines, table)
        elif isinstance(statement, (gast.For, gast.While)):
            header = _unparse(_header_only(statement)).splitlines()[0]
            lines.append(pad + header)
            table.append(origin)
            _block(statement.body or [gast.Pass()], depth + 1, lines, table)
        else:
            text = _unparse(statement).splitlines()
            lines.extend(pad + line for line in text)
            table.extend([origin] * len(text))


def _unparse(node) -> str:
    text = _quick(node, _TEST)
    if text is not None:
        return text
    tree = gast.gast_to_ast(node)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree)


# The same text as ast.unparse for the nodes generated code is made of, without
# converting gast to ast first (most of emitting's time); None for anything else,
# which ast.unparse then writes. Precedences and parenthesisation follow ast.unparse.
_TUPLE, _TEST, _OR, _AND, _NOT, _CMP = 1, 3, 4, 5, 6, 7
_ARITH, _TERM, _FACTOR, _POWER, _ATOM = 12, 13, 14, 15, 17
_BINARY = {
    gast.Add: ("+", _ARITH), gast.Sub: ("-", _ARITH), gast.Mult: ("*", _TERM),
    gast.Div: ("/", _TERM), gast.FloorDiv: ("//", _TERM), gast.Mod: ("%", _TERM),
    gast.MatMult: ("@", _TERM), gast.Pow: ("**", _POWER),
}  # fmt: skip
_UNARY = {gast.USub: "-", gast.UAdd: "+", gast.Invert: "~"}
_COMPARE = {
    gast.Eq: "==", gast.NotEq: "!=", gast.Lt: "<", gast.LtE: "<=", gast.Gt: ">",
    gast.GtE: ">=", gast.Is: "is", gast.IsNot: "is not", gast.In: "in",
    gast.NotIn: "not in",
}  # fmt: skip


def _quick(node, context: int) -> str | None:
    kind = type(node)
    if kind is gast.Name:
        return node.id
    if kind is gast.Constant:
        return _constant(node.value)
    if kind is gast.BinOp:
        symbol, precedence = _BINARY.get(type(node.op), (None, 0))
        if symbol is None:
            return None
        power = precedence == _POWER  # right-associative
        left = _quick(node.left, precedence + 1 if power else precedence)
        right = _quick(node.right, precedence if power else precedence + 1)
        if left is None or right is None:
            return None
        return _parenthesised(f"{left} {symbol} {right}", precedence, context)
    if kind is gast.UnaryOp:
        symbol = _UNARY.get(type(node.op))
        if symbol is None:
            return None
        operand = _quick(node.operand, _FACTOR)
        return (
            None
            if operand is None
            else _parenthesised(symbol + operand, _FACTOR, context)
        )
    if kind is gast.Call:
        function = _quick(node.func, _ATOM)
        parts = [_quick(argument, _TEST) for argument in node.args]
        for keyword in node.keywords:
            value = _quick(keyword.value, _TEST)
            parts.append(None if keyword.arg is None or value is None else
                         f"{keyword.arg}={value}")  # fmt: skip
        if function is None or None in parts:
            return None
        return f"{function}({', '.join(parts)})"
    if kind is gast.Attribute:
        value = _quick(node.value, _ATOM)
        if value is None or type(node.value) is gast.Constant:
            return None
        return f"{value}.{node.attr}"
    if kind is gast.Subscript:
        value = _quick(node.value, _ATOM)
        index = node.slice
        if type(index) is gast.Tuple and index.elts:
            parts = [_quick(item, _TEST) for item in index.elts]
            if None in parts:
                return None
            inside = ", ".join(parts) + ("," if len(parts) == 1 else "")
        else:
            inside = _quick(index, _TUPLE)
        if value is None or inside is None:
            return None
        return f"{value}[{inside}]"
    if kind is gast.Slice:
        parts = [
            "" if part is None else _quick(part, _TEST)
            for part in (node.lower, node.upper)
        ]
        if node.step is not None:
            parts.append(_quick(node.step, _TEST))
        return None if None in parts else ":".join(parts)
    if kind is gast.Tuple or kind is gast.List:
        parts = [_quick(item, _TEST) for item in node.elts]
        if None in parts:
            return None
        if kind is gast.List:
            return f"[{', '.join(parts)}]"
        inside = ", ".join(parts) + ("," if len(parts) == 1 else "")
        return f"({inside})" if not parts or context > _TUPLE else inside
    if kind is gast.Compare:
        parts = [_quick(node.left, _CMP + 1)]
        for op, right in zip(node.ops, node.comparators):
            symbol = _COMPARE.get(type(op))
            parts += [symbol, _quick(right, _CMP + 1)]
        if None in parts:
            return None
        return _parenthesised(" ".join(parts), _CMP, context)
    if kind is gast.Assign:
        targets = [_quick(target, _TUPLE) for target in node.targets]
        value = _quick(node.value, _TEST)
        return (
            None
            if None in targets or value is None
            else (" = ".join(targets) + f" = {value}")
        )
    if kind is gast.Return:
        if node.value is None:
            return "return"
        value = _quick(node.value, _TEST)
        return None if value is None else f"return {value}"
    if kind is gast.Expr:
        return _quick(node.value, _TEST)
    if kind is gast.Pass:
        return "pass"
    return None


def _parenthesised(text: str, precedence: int, context: int) -> str:
    return f"({text})" if context > precedence else text


def _constant(value) -> str | None:
    if value is None or value is True or value is False or value is Ellipsis:
        return "..." if value is Ellipsis else repr(value)
    kind = type(value)
    if kind is int:
        return repr(value)
    if kind is float:
        return repr(value) if value == value and abs(value) != float("inf") else None
    if kind is str and "'" not in value and "\\" not in value and value.isprintable():
        return repr(value)
    return None


def _header_only(statement):
    import copy

    shell = copy.copy(statement)
    shell.body = [gast.Pass()]
    shell.orelse = []
    return shell


def _if(statement: gast.If, depth: int, keyword: str, lines: list, table: list):
    pad = "    " * depth
    test = _unparse(statement.test)
    lines.append(f"{pad}{keyword} {test}:")
    table.append(statement.__dict__.get(ATTRIBUTE))
    _block(statement.body or [gast.Pass()], depth + 1, lines, table)
    orelse = [s for s in statement.orelse]
    if len(orelse) == 1 and isinstance(orelse[0], gast.If):
        _if(orelse[0], depth, "elif", lines, table)
    elif orelse:
        lines.append(f"{pad}else:")
        table.append(None)
        _block(orelse, depth + 1, lines, table)


GENERATED_PREFIX = "<ppto generated: "


def failing_statement(error: BaseException) -> str | None:
    """Where generated code failed, as text for an error message: the statement
    that raised ``error`` (in generated code or in an array library it called) and
    the original line its block differentiates (``# grad of:``). None where the
    error is not the array library's: raised by a ``raise`` the user wrote, or by
    a function of the user's that generated code called."""
    frame, line = None, None
    for frame_, line_ in traceback_frames(error):
        if frame_.f_code.co_filename.startswith(GENERATED_PREFIX):
            frame, line = frame_, line_
        elif frame is not None and not _library_file(frame_.f_code.co_filename):
            return None
    if frame is None:
        return None
    lines = linecache.getlines(frame.f_code.co_filename)
    if not 0 < line <= len(lines) or lines[line - 1].lstrip().startswith("raise"):
        return None
    where = f"`{lines[line - 1].strip()}`"
    for above in reversed(lines[: line - 1]):
        if above.lstrip().startswith("# grad of:"):
            return f"{where}, {above.strip()[2:]}"
        if above.startswith("def "):
            break
    return where


def failing_origins(error: BaseException) -> list:
    """The user's lines generated code was running when it raised ``error``: the
    origins (see origins.py) of each generated frame's line that has some,
    innermost first (a helper's line, then the line that called it)."""
    found = []
    for frame, line in traceback_frames(error):
        if frame.f_code.co_filename.startswith(GENERATED_PREFIX):
            at = origin_at(frame, line)
            if at is not None:
                found.insert(0, at)
    return found


def traceback_frames(error: BaseException):
    """(frame, line) of each traceback entry of ``error``, outermost first."""
    entry = error.__traceback__
    while entry is not None:
        yield entry.tb_frame, entry.tb_lineno
        entry = entry.tb_next


# installed packages (NumPy, CuPy, numexpr), ppto itself and Python's standard
# library (an operator's error may pass through contextlib)
_LIBRARY_ROOTS = (
    os.path.dirname(os.path.dirname(numpy.__file__)) + os.sep,
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
    os.path.dirname(os.__file__) + os.sep,
    "<frozen ",
)


def _library_file(filename: str) -> bool:
    """Whether ``filename`` is an array library's or ppto's own, not the user's."""
    return filename.startswith(_LIBRARY_ROOTS)


def compile_source(
    source: str, name: str, namespace: dict, label: str, table: list | None = None
):
    """Compile generated ``source`` defining ``name`` into ``namespace``; the source is
    registered in linecache under a filename that names ``label``, and ``table``
    (its lines' origins, see ``rendered``) where failing code finds it."""
    digest = hashlib.sha1(source.encode()).hexdigest()[:10]
    filename = f"{GENERATED_PREFIX}{label} {digest}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    if table is not None:
        register(namespace, filename, table)
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]
