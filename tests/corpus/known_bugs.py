"""Transformer bugs that corpus checks still hit: one reason per bug, shared by the
corpus modules' ``KNOWN_FAILING`` tables (see tests/corpus/checks.py). Delete a reason
once no table uses it."""

# --- second order (forward over the generated gradient) ---

LIST_POP_SECOND = (
    "second order: a generated gradient that pops a list adjoint or a helper's saved "
    "tape (dhs.pop(), total_1_tape.pop()) or calls list(unstack(...)) is rejected: "
    "TransformError 'cannot differentiate the method .pop()' / 'list has no ppto "
    "operator'"
)
