"""How an OSError about a file is said to a person: the path and the system's reason
(``data.log: No such file or directory``, as ``cat`` says it), not Python's
``[Errno 2] No such file or directory: 'data.log'``."""

from __future__ import annotations

__all__ = ["reason", "said"]


def reason(exc: OSError) -> str:
    """The system's reason (``No such file or directory``); the whole text when the
    error carries none (one raised with a message of our own)."""
    return exc.strerror or str(exc)


def said(exc: OSError) -> str:
    """``PATH: reason`` (``PATH -> OTHER: reason`` for a rename or link), or the text
    alone when the error names no file."""
    if exc.filename is None or exc.strerror is None:
        return str(exc)
    where = str(exc.filename)
    if exc.filename2 is not None:
        where += f" -> {exc.filename2}"
    return f"{where}: {exc.strerror}"
