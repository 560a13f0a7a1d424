"""Debugging aids: what generated code keeps in memory (``saved_bytes``)."""

from ppto.debug.tape import saved_bytes

__all__ = ["saved_bytes"]
