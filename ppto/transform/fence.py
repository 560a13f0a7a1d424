"""The fence: one accept-or-reject decision for every kind of syntax node.

Everything the later stages handle is accepted; everything else raises
``TransformError`` at the user's line with what to write instead. Nothing unknown
slips through: a node type with no method here is rejected.
"""

from __future__ import annotations

import builtins

import gast

from ppto.transform import trees
from ppto.transform.objects import constant_key, holds
from ppto.transform.resolve import expression_text, static_value
from ppto.transform.source import ParsedFunction, SourceMap

ALLOWED_BINARY = (
    gast.Add,
    gast.Sub,
    gast.Mult,
    gast.Div,
    gast.Pow,
    gast.MatMult,
    gast.FloorDiv,
    gast.Mod,
)
# &, | and ^ combine masks ((x > 0) & (y < 1)): whole numbers, with no derivative,
# computed as written (normalize makes them passive, as it does comparisons)
BITWISE = (gast.BitAnd, gast.BitOr, gast.BitXor)


_SYMBOLS = {
    gast.LShift: "<<", gast.RShift: ">>", gast.BitOr: "|", gast.BitXor: "^",
    gast.BitAnd: "&", gast.FloorDiv: "//", gast.Mod: "%",
}  # fmt: skip

# Contexts and operator symbols carry no decisions of their own.
_NEUTRAL = (gast.expr_context, gast.operator, gast.unaryop, gast.cmpop, gast.boolop)


# Built-ins that read or write the function's variables by a name in a string: the
# analysis sees no dependency (eval("x ** 2") had a zero gradient) -> what instead
_BY_NAME = {
    "eval": "write the expression itself (x ** 2 for eval('x ** 2'))",
    "exec": "write the statements themselves",
    "locals": "name the variable itself (y for locals()['y'])",
    "vars": "name the variable itself (x for vars()['x']; vars(obj) reads an object)",
    "globals": "name the module-level value itself, and pass a value the function "
    "changes as an argument and return its new value",
}


def builtin_read_by_name(value) -> str | None:
    """The name of the built-in of ``_BY_NAME`` that ``value`` is, else None."""
    return next((n for n in _BY_NAME if value is getattr(builtins, n)), None)


def by_name_error(source: SourceMap, node, name: str):
    """The error for ``node``, a call or reference reaching the built-in ``name``
    of ``_BY_NAME``."""
    text = expression_text(node.func if isinstance(node, gast.Call) else node)
    named = "" if text == name else f" (as {text})"
    return source.error(
        node,
        f"ppto cannot differentiate {name}(){named}: it reads or writes variables by "
        "a name in a string, so ppto cannot see which values depend on which (the "
        "gradient through them would be lost)",
        _BY_NAME[name],
    )


class Fence(trees.Visitor):
    """Walks a function's tree; ``check`` raises on the first rejected construct."""

    def __init__(self, source: SourceMap, namespace=None, local=()) -> None:
        self.source = source
        self.depth = 0
        self.namespace = namespace if namespace is not None else vars(builtins)
        self.local = set(local)

    def check(self, tree: gast.FunctionDef) -> None:
        self.visit(tree)

    def reject(self, node, what: str, instead: str):
        raise self.source.error(node, f"ppto cannot differentiate {what}", instead)

    def generic_visit(self, node):
        if isinstance(node, _NEUTRAL):
            return
        kind = type(node).__name__
        self.reject(
            node,
            f"a {kind} construct",
            "rewrite it with the supported subset "
            "(assignments, if/else, for/while loops, calls, arithmetic)",
        )

    def accept(self, node):
        super().generic_visit(node)

    # --- definitions -------------------------------------------------------------

    def visit_FunctionDef(self, node):
        if self.depth:
            self.reject(
                node,
                "a nested function definition",
                "define the helper at module level and call it",
            )
        arguments = node.args
        if arguments.vararg or arguments.kwarg:
            self.reject(
                node, "*args or **kwargs parameters", "list the parameters explicitly"
            )
        self.depth += 1
        for statement in node.body:
            self.visit(statement)
        for default in arguments.defaults + [d for d in arguments.kw_defaults if d]:
            self.visit(default)
        self.depth -= 1

    def visit_Lambda(self, node):
        self.reject(node, "a lambda inside the function", "define a function with def")

    def visit_ClassDef(self, node):
        self.reject(node, "a class definition", "define classes outside the function")

    # --- statements ----------------------------------------------------------------

    def visit_Return(self, node):
        self.accept(node)

    def visit_Assign(self, node):
        for target in node.targets:
            self._check_target(target)
        self.visit(node.value)

    def visit_AugAssign(self, node):
        self._check_target(node.target)
        if not isinstance(node.op, ALLOWED_BINARY + BITWISE):
            self._unsupported_operator(node)
        self.visit(node.value)

    def visit_AnnAssign(self, node):
        if node.value is None:
            self.reject(node, "an annotation without a value", "assign a value")
        self._check_target(node.target)
        self.visit(node.value)

    def _check_target(self, target):
        if isinstance(target, gast.Name):
            return
        if isinstance(target, (gast.Tuple, gast.List)):
            for element in target.elts:
                if isinstance(element, gast.Starred):
                    self.reject(
                        element,
                        "starred unpacking",
                        "unpack into a fixed number of names",
                    )
                self._check_target(element)
            return
        if isinstance(target, gast.Subscript):
            self.visit(target.value)
            self.visit(target.slice)
            return
        self.reject(
            target,
            f"assignment to {type(target).__name__.lower()}s",
            "assign to a plain variable name",
        )

    def visit_If(self, node):
        self.accept(node)

    def visit_For(self, node):
        self._check_target(node.target)
        self.accept(node)

    def visit_While(self, node):
        self.accept(node)

    def visit_Break(self, node):
        pass

    def visit_Continue(self, node):
        pass

    def visit_Expr(self, node):
        self.accept(node)

    def visit_Pass(self, node):
        pass

    def visit_Assert(self, node):
        self.accept(node)

    def visit_Raise(self, node):
        self.accept(node)

    def visit_Try(self, node):
        self.reject(node, "try/except", "check the inputs before calling the function")

    def visit_Match(self, node):
        self.reject(
            node,
            "a match statement",
            "test the cases with if/elif/else (if k == 1: ... elif k == 2: ...)",
        )

    def visit_With(self, node):
        self.reject(
            node,
            "a with block",
            "move the context manager outside the differentiated function",
        )

    # (those of names the function only reads were dropped after parsing)
    def visit_Global(self, node):
        self.reject(
            node,
            "a global declaration of a variable the function assigns",
            "return the new value and assign it outside the function",
        )

    def visit_Nonlocal(self, node):
        self.reject(
            node,
            "a nonlocal declaration of a variable the function assigns",
            "return the new value and assign it outside the function",
        )

    def visit_Delete(self, node):  # (of names nothing reads again: dropped)
        self.reject(
            node,
            "del of an item or attribute, or of a name read again",
            "build a new list without the item (items = items[1:]), or delete it "
            "as a slice (del items[i : i + 1]), and let variables go out of use",
        )

    def visit_Import(self, node):
        self.reject(node, "an import inside the function", "import at module level")

    visit_ImportFrom = visit_Import

    # --- expressions ---------------------------------------------------------------

    def visit_BinOp(self, node):
        if not isinstance(node.op, ALLOWED_BINARY + BITWISE):
            self._unsupported_operator(node)
        if isinstance(node.left, gast.List) and isinstance(node.right, gast.List):
            self.reject(  # (a list and an array add elementwise: that is allowed)
                node,
                "joining lists with +",
                "build the list with append: items = [a], then items.append(b)",
            )
        self.accept(node)

    def _unsupported_operator(self, node):
        symbol = _SYMBOLS.get(type(node.op), type(node.op).__name__)
        self.reject(
            node, f"the {symbol} operator", "use +, -, *, /, **, @ or a ppto operator"
        )

    def visit_UnaryOp(self, node):
        self.accept(node)

    def visit_BoolOp(self, node):
        self.accept(node)

    def visit_Compare(self, node):
        self.accept(node)

    def visit_IfExp(self, node):
        self.accept(node)

    def visit_Call(self, node):
        if self.refuse_by_name(node):  # (vars(obj): its arguments only)
            for argument in node.args + [k.value for k in node.keywords]:
                self.visit(argument)
            return
        if isinstance(node.func, gast.Name) and node.func.id not in self.local:
            if self.namespace.get(node.func.id) is complex:
                self.reject_complex(node, "complex()")
        for argument in node.args:
            if isinstance(argument, gast.Starred):
                self.reject(
                    argument,
                    "*-unpacking in a call",
                    "pass the arguments "
                    "one by one, or pass the list itself (ppto.stack(xs))",
                )
        for keyword in node.keywords:
            if keyword.arg is None:
                self.reject(node, "**-unpacking in a call", "pass keywords by name")
        self.accept(node)

    def refuse_by_name(self, node) -> bool:
        """``eval``, ``exec``, ``locals()``, ``vars()``, ``globals()``: the
        built-ins (not the user's own of those names), however the call reaches
        them (``EV = eval`` at module level, ``builtins.eval``, ``getattr(builtins,
        "eval")``; a local ``ev = eval`` is refused where it names eval). True
        for ``vars(obj)``, which reads an object, not the function's variables."""
        name = self.by_name(node.func)
        if name == "vars" and node.args:
            return True
        if name is None:
            name = self.by_name(node)  # (getattr(builtins, "eval") itself)
            if name is None:
                return False
        self.reject_by_name(node, name)

    def by_name(self, node) -> str | None:
        """The name of the built-in of ``_BY_NAME`` that ``node`` is, resolved as
        the transformer resolves a call's function (``resolve.static_value``), a
        ``getattr`` of such a value by a literal name or an item of one by a
        literal key or index (``builtins.__dict__["eval"]``) too; else None."""
        if isinstance(node, gast.Subscript):
            found, value = self.item(node)
            return builtin_read_by_name(value) if found else None
        if isinstance(node, gast.Call):  # getattr(builtins, "eval")
            if (
                self.by_value(node.func) is not getattr
                or len(node.args) != 2
                or node.keywords
                or not isinstance(node.args[1], gast.Constant)
                or not isinstance(node.args[1].value, str)
            ):
                return None
            found, base = static_value(node.args[0], self.namespace, self.local)
            value = getattr(base, node.args[1].value, None) if found else None
        else:
            value = self.by_value(node)
        return builtin_read_by_name(value)

    def by_value(self, node):
        """What a name or dotted name outside the function is, else None."""
        return static_value(node, self.namespace, self.local)[1]

    def item(self, node) -> tuple[bool, object]:
        """``(found, value)`` of a name, dotted name or item of one by a literal key
        or index (``CALLS["run"]``, ``TABLE[0]``) outside the function."""
        if not isinstance(node, gast.Subscript):
            return static_value(node, self.namespace, self.local)
        key = constant_key(node)
        found, holder = self.item(node.value) if key is not None else (False, None)
        if found and holds(holder, key):
            return True, holder[key]
        return False, None

    def reject_by_name(self, node, name: str):
        raise by_name_error(self.source, node, name)

    def visit_keyword(self, node):
        self.accept(node)

    def visit_Attribute(self, node):
        name = self.by_name(node)  # (builtins.eval not called here: ev = ...)
        if name is not None:
            self.reject_by_name(node, name)
        self.accept(node)

    def visit_Subscript(self, node):
        if isinstance(node.ctx, gast.Load):  # (ev = builtins.__dict__["eval"])
            name = self.by_name(node)
            if name is not None:
                self.reject_by_name(node, name)
        self.accept(node)

    def visit_Slice(self, node):
        self.accept(node)

    def visit_Name(self, node):
        if isinstance(node.ctx, gast.Load):  # (ev = eval: refused here)
            name = self.by_name(node)
            if name is not None:
                self.reject_by_name(node, name)

    def visit_Constant(self, node):
        if isinstance(node.value, complex):
            self.reject_complex(node, f"the complex number {node.value!r}")

    def reject_complex(self, node, what: str):
        self.reject(
            node,
            f"{what}: ppto differentiates real computations only, and a "
            "complex intermediate value needs conjugates its rules do not take "
            "(the gradient would be wrong)",
            "compute the real and imaginary parts as two real arrays (for "
            "z = x * (a + bj): re, im = a * x, b * x; abs(z) ** 2 = re ** 2 + "
            "im ** 2; exp(1j * x) = cos(x), sin(x))",
        )

    def visit_Tuple(self, node):
        self.accept(node)

    def visit_List(self, node):
        self.accept(node)

    def visit_JoinedStr(self, node):
        self.accept(node)

    def visit_FormattedValue(self, node):
        self.accept(node)

    # (comprehensions.py writes the others as loops: these are where it cannot,
    # such as an assert's message or a parameter's default)
    def visit_ListComp(self, node):
        self.reject(
            node,
            "a list comprehension here",
            "build the list with a for loop and append before this statement",
        )

    def visit_GeneratorExp(self, node):
        self.reject(
            node,
            "a generator expression here",
            "build a list with a for loop and append before this statement",
        )

    def visit_SetComp(self, node):
        self.reject(
            node,
            "a set comprehension (a set has no order to match values and their "
            "gradients by, and arrays are not hashable)",
            "build a list with a list comprehension or a for loop",
        )

    def visit_Dict(self, node):
        self.reject(
            node,
            "a dict here (one is taken where its keys are constants written out, "
            "assigned to a name or returned; not as an item of another dict)",
            'write the keys out (d = {"h": h, "y": y}) and assign it to a name, or '
            "use separate variables, a tuple or a list; for a dict inside a dict, "
            'join the keys (d = {"a_w": w}) or keep the inner dict in a name of its '
            'own (a = {"w": w}) read as a["w"]',
        )

    def visit_Set(self, node):
        self.reject(node, "a set", "use a tuple or a list")

    def visit_NamedExpr(self, node):  # (elsewhere: see visit_ListComp)
        self.reject(
            node,
            "an assignment expression (:=) here",
            "assign in a separate statement first",
        )

    def visit_Starred(self, node):
        self.reject(node, "starred expressions", "write the elements out")

    def visit_Yield(self, node):
        self.reject(node, "a generator (yield)", "return a value, or a tuple of values")

    visit_YieldFrom = visit_Yield

    def visit_Await(self, node):
        self.reject(node, "await", "differentiate a synchronous function")


def check(parsed: ParsedFunction) -> None:
    """Raise ``TransformError`` at the first construct the transformer cannot handle."""
    local = {
        node.id
        for node in gast.walk(parsed.tree)
        if isinstance(node, gast.Name) and not isinstance(node.ctx, gast.Load)
    }
    Fence(parsed.source, parsed.namespace, local).check(parsed.tree)
