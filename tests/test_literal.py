"""``analyze.literal`` decides constants and never-literal nodes itself: it gives
what ``gast.literal_eval`` gives (or refuses) for every kind of expression."""

import gast
import pytest

from ppto.transform.analyze import NOT_LITERAL, literal

CASES = [
    "1", "-1", "1.5", '"s"', 'b"x"', "None", "True", "...", "1+2j", "x", "np.sum",
    "a[0]", "f(x)", "np.float64(1)", "set()", "set(x)", "set(a=1)", "(1, 2)",
    "(1, x)", "[1, -2.0]", "{1: 2}", "{1}", "x + 1", "(set(), 1)", "(set, 1)",
]  # fmt: skip


def _literal_eval(node):
    try:
        return gast.literal_eval(node)
    except Exception:
        return NOT_LITERAL


@pytest.mark.parametrize("text", CASES)
def test_literal_is_literal_eval(text):
    node = gast.parse(text).body[0].value
    found, expected = literal(node), _literal_eval(node)
    assert type(found) is type(expected) and (found is NOT_LITERAL or found == expected)
