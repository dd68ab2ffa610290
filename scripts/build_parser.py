"""Rebuild the shipped parser from the grammar (run after editing grammar.lark):

    .venv/bin/python scripts/build_parser.py

It writes policy_dsl/memlineage_dsl/grammar.lark.bin (`memlineage_dsl.grammar_blob`),
which tests/dsl/test_grammar_blob.py checks is current.
"""

from __future__ import annotations

import sys
from pathlib import Path

from memlineage_dsl import grammar_blob
from memlineage_dsl.syntax import parser_options

OUT = Path(__file__).resolve().parents[1] / "policy_dsl" / "memlineage_dsl" / grammar_blob.BLOB


def main() -> int:
    OUT.write_bytes(grammar_blob.blob(grammar_blob.build(**parser_options())))
    print(f"wrote {OUT} ({OUT.stat().st_size:,} bytes): {grammar_blob.stamp()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
