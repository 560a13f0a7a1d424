"""The transformer: Python source of a function in, Python source of its derivative out.

One stage per module: ``source`` (read and parse, with a source map), ``fence``
(accept or reject each construct), ``resolve`` (what each called name is),
``structure`` (single exit, conditional expressions as statements), ``ssa``
(renaming so no value is overwritten), ``normalize`` (one operation per statement),
``analyze`` (activity and ranks), ``inline`` (gradient rules as source), ``reverse``
(the adjoint), ``optimize``, ``emit`` (readable, deterministic source) and ``lower``
(the version that runs on a device's arrays).
"""
