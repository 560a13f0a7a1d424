"""Debugging aids: what generated code keeps in memory (``saved_bytes``), and the
memory checker (``python -m ppto.debug.memcheck script.py``, or
``memcheck.tracking()`` in a program)."""

from ppto.debug.tape import saved_bytes

__all__ = ["saved_bytes"]
