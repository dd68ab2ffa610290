"""The LALR parser of `grammar.lark`, shipped built: loading it takes ~35 ms where
building it takes ~0.7 s (the grammar analysis and lark's regex-collision check),
which every `memlineage lint`, `fmt`, `test` and `serve` would pay at start.

`grammar.lark.bin` is lark's own serialized form of the parser (`Lark.save`),
preceded by one line naming the grammar's sha256 and the lark version that built it.
It is used only when both match; otherwise the parser is built from the grammar (an
edited grammar works at once, only slower to start, and
`tests/dsl/test_grammar_blob.py` fails until `scripts/build_parser.py` rebuilds it).
The file is part of the package, as trusted as its code: lark's format is a pickle.
"""

from __future__ import annotations

import hashlib
import io
from importlib.resources import files
from typing import Any

import lark
from lark import Lark

GRAMMAR = "grammar.lark"
BLOB = "grammar.lark.bin"


def stamp() -> str:
    """What the shipped blob must have been built from: this grammar, this lark."""
    grammar = files(__package__).joinpath(GRAMMAR).read_bytes()
    return f"{hashlib.sha256(grammar).hexdigest()} lark {lark.__version__}"


def build(**options: Any) -> Lark:
    """The parser from the grammar itself, strict: a shift/reduce conflict or two
    terminals that can match the same text fail the build."""
    return Lark.open_from_package(__package__, GRAMMAR, strict=True, **options)


def load(**options: Any) -> Lark:
    """The shipped parser when it was built from this grammar by this lark, else one
    built now with `options` (those the blob was built with)."""
    try:
        head, _, body = files(__package__).joinpath(BLOB).read_bytes().partition(b"\n")
    except OSError:
        return build(**options)
    if head.decode("ascii", "replace") != stamp():
        return build(**options)
    return Lark.load(io.BytesIO(body))


def blob(parser: Lark) -> bytes:
    """The file `load` reads for `parser` (built by `build`)."""
    out = io.BytesIO()
    parser.save(out)
    return stamp().encode() + b"\n" + out.getvalue()


__all__ = ["BLOB", "GRAMMAR", "blob", "build", "load", "stamp"]
