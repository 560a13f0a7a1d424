"""ppto's parser gives gast's trees: node for node, positions included, over every
Python file of ppto and its tests, every eighth module of the standard library, and
constructs that gast converts specially."""

import ast
import sysconfig
from pathlib import Path

import gast
import pytest

from ppto.transform.syntax import parse, to_gast

ROOT = Path(__file__).resolve().parents[1]
STANDARD_LIBRARY = Path(sysconfig.get_paths()["stdlib"])
# ppto's own files and every eighth module of the standard library: with the
# constructs below, every node kind the whole library has (all of it takes 15 s)
FILES = (
    sorted([*ROOT.glob("ppto/**/*.py"), *ROOT.glob("tests/**/*.py")])
    + sorted(STANDARD_LIBRARY.glob("*.py"))[::8]
)

SPECIAL_CASES = """
async def f(a, /, b: int = 1, *args, c, d=2, **kwargs) -> None:
    async with open(a) as (x, y), g() as z:
        pass
    async for i in b:
        yield i
    try:
        pass
    except (ValueError, TypeError) as error:
        del error
    except Exception:
        raise
    finally:
        global q
    match a:
        case [1, *rest] if rest:
            pass
        case {"k": v, **others}:
            pass
        case Point(x=0) | None:
            pass
    return [v async for v in b if v], {k: v for k, v in c}, lambda *a, **k: a
@decorator(1)
class C(Base, metaclass=M):
    x: int = 0
    def m(self):
        nonlocal_ = (yield from self)
        print(f"{self!r:>10}", *self, **{"a": 1}, sep="")
        return self[1:2, ::3, ...], (w := 3), not w, -w, +w, w if w else ~w
"""


def _equal(a, b) -> bool:
    """The same tree: node classes, and every attribute each node holds (fields,
    positions and anything else), recursively."""
    if isinstance(a, list) or isinstance(b, list):
        return (
            type(a) is type(b)
            and len(a) == len(b)
            and all(_equal(x, y) for x, y in zip(a, b))
        )
    if isinstance(a, ast.AST) or isinstance(b, ast.AST):
        return (
            type(a) is type(b)
            and a.__dict__.keys() == b.__dict__.keys()
            and all(_equal(a.__dict__[key], b.__dict__[key]) for key in a.__dict__)
        )
    return type(a) is type(b) and a == b


def _same(text: str):
    assert _equal(parse(text), gast.parse(text))


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.name)
def test_trees_equal_gasts_on_real_files(path):
    text = path.read_bytes().decode("utf-8", errors="replace")
    try:
        gast.parse(text)
    except SyntaxError as error:  # then ppto refuses it alike
        with pytest.raises(type(error)):
            parse(text)
        return
    _same(text)


def test_trees_equal_gasts_on_constructs_gast_treats_specially():
    _same(SPECIAL_CASES)


def test_an_ast_expression_converts_as_gast_converts_it():
    expression = ast.parse("np.exp(x[:, 1]) * -y", mode="eval").body
    assert _equal(to_gast(expression), gast.ast_to_gast(expression))


def test_syntax_errors_are_pythons():
    with pytest.raises(SyntaxError):
        parse("def f(:\n    pass")
