"""A helper in a file of its own, for tests/test_error_origins.py: an error in its
generated code names this file and line, and the caller's line."""


def scaled_row(a, i):
    row = a[i] * 2.0
    return row
