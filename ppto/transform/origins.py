"""Where each generated statement came from: the user's file, line and text, and
whether it computes that line's value, its gradient or its tangent. Generators mark
the statements they make (an attribute every stage's copies keep); emitting reads the
marks back as one entry per generated line, kept beside the compiled code and read
only when generated code fails, so that the error names the user's line.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, replace

ATTRIBUTE = "user_origin"  # the attribute a generated statement carries its Origin in
# the key of the generated source's origin table in its functions' globals
TABLE = "__ppto_origins__"

# what a statement does for its user line: computes it, or its gradient or tangent
COMPUTES, GRADIENT, TANGENT = "", "gradient", "tangent"


@dataclass(frozen=True)
class Origin:
    """One user line a generated statement was made from."""

    filename: str
    line: int
    text: str  # the user's statement, on one line
    role: str = COMPUTES

    def place(self) -> str:
        name = os.path.basename(self.filename)
        return f"in the {self.role} of {name}" if self.role else f"at {name}"

    def quoted(self) -> str:
        return f"line {self.line} (`{self.text}`)"


def origin_of(parsed, statement, role: str = COMPUTES) -> tuple | None:
    """The origins of a generated statement made for the user's ``statement`` (a
    gast statement of ``parsed``'s tree; None where it has none or is no line the
    user wrote, such as a renaming copy)."""
    statement = getattr(statement, "split_from", statement)
    if statement is None or getattr(statement, "synthetic", False):
        return None
    if not hasattr(statement, "lineno"):
        return None
    line, _ = parsed.source.position(statement)
    if parsed.source.filename.startswith("<"):  # generated code differentiated again
        return _inherited(parsed, line, role)
    text = parsed.source.statement_text(statement)
    return (Origin(parsed.source.filename, line, text, role),)


def _inherited(parsed, line: int, role: str) -> tuple | None:
    """The origins of line ``line`` of the generated code ``parsed`` was read from
    (a derivative's, differentiated again): the user's lines it came from, not the
    generated text. None for code made without a table (a wrapper ppto wrote)."""
    function = parsed.scope or parsed.fn
    tables = getattr(function, "__globals__", {}).get(TABLE, {})
    table = tables.get(parsed.source.filename)
    if table is None or not 0 < line <= len(table) or table[line - 1] is None:
        return None
    return tuple(replace(o, role=o.role or role) for o in table[line - 1])


def error_at(origin: Origin, message: str, suggestion: str):
    """A ``TransformError`` at the user's line ``origin`` (as ``SourceMap.error``
    says one, without a column: generated code differentiated again knows lines)."""
    from ppto.errors import TransformError

    parts = [message, f'  File "{origin.filename}", line {origin.line}']
    parts += [f"    {origin.text}", f"  Instead: {suggestion}"]
    error = TransformError("\n".join(parts))
    error.filename, error.lineno, error.text = origin.filename, origin.line, origin.text
    return error


def mark(statements: list, origins: tuple | None) -> list:
    """``statements``, each (and each nested one) that has no origin yet given
    ``origins``: statements marked by the generator of an inner block keep theirs."""
    if origins is None:
        return statements
    pending = list(statements)
    while pending:
        statement = pending.pop()
        if not isinstance(statement, ast.AST):
            continue
        if ATTRIBUTE not in statement.__dict__:
            statement.__dict__[ATTRIBUTE] = origins
        for block in ("body", "orelse"):
            pending.extend(getattr(statement, block, ()))
    return statements


def mark_alone(statement, origins: tuple | None) -> None:
    """``mark`` for ``statement`` itself (a loop's or branch's header), not the
    statements it holds."""
    if origins is not None and ATTRIBUTE not in statement.__dict__:
        statement.__dict__[ATTRIBUTE] = origins


def mark_joined(fused, statements: list) -> None:
    """Give ``fused``, the statement made of ``statements`` (a fused kernel's
    call), all of their origins, each once, in order (none where none had any)."""
    found = []
    for statement in statements:
        for origin in statement.__dict__.get(ATTRIBUTE) or ():
            if origin not in found:
                found.append(origin)
    if found:
        fused.__dict__[ATTRIBUTE] = tuple(found)


def register(namespace: dict, filename: str, table: list) -> None:
    """Keep ``table`` (one entry per line of the source compiled under
    ``filename``: a tuple of Origins or None) where a failing frame finds it."""
    namespace.setdefault(TABLE, {})[filename] = table


def at(frame, line: int) -> tuple | None:
    """The origins of generated line ``line`` that ``frame`` was running."""
    table = frame.f_globals.get(TABLE, {}).get(frame.f_code.co_filename)
    if table is None or not 0 < line <= len(table):
        return None
    return table[line - 1]


def describe(origins: tuple) -> str:
    """The user's lines of ``origins`` in words, grouped by file and role: ``at
    rt.py, line 5 (`...`) and line 6 (`...`); in the gradient of rt.py, line 6
    (`...`)`` for a fused statement computing two lines and a gradient."""
    groups: dict = {}
    for origin in origins:
        groups.setdefault(origin.place(), []).append(origin.quoted())
    return "; ".join(
        f"{place}, {', '.join(lines[:-1])}{' and ' if len(lines) > 1 else ''}"
        f"{lines[-1]}"
        for place, lines in groups.items()
    )
