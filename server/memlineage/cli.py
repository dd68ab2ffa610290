"""The one `memlineage` command: subcommands dispatch to small adapters.

Language commands (`lint`, `fmt`, `test`) live in `memlineage_dsl`; the
sidecar's commands are added beside them as they land.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="memlineage",
        description="Policy-as-code enforcement sidecar for the memory of LLM agents.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    lint = sub.add_parser("lint", help="check .mlp files; exit 1 on any error")
    lint.add_argument("paths", nargs="+", help=".mlp files or directories")
    lint.add_argument("--format", choices=("human", "json", "sarif"), default="human")
    lint.add_argument("--each", action="store_true",
                      help="treat every file as its own policy set")

    fmt = sub.add_parser("fmt", help="format .mlp files in place")
    fmt.add_argument("paths", nargs="+")
    fmt.add_argument("--check", action="store_true",
                     help="list files that would change; exit 1 if any")
    fmt.add_argument("--diff", action="store_true", help="print a unified diff")

    test = sub.add_parser("test", help="run the test blocks of .mlp files")
    test.add_argument("paths", nargs="+")
    test.add_argument("-v", "--verbose", action="store_true")
    test.add_argument("--each", action="store_true",
                      help="treat every file as its own policy set")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    out = sys.stdout
    if args.command == "lint":
        from memlineage_dsl.commands import lint_command

        return lint_command(args.paths, args.format, out, each=args.each)
    if args.command == "fmt":
        from memlineage_dsl.fmt_command import fmt_paths

        return fmt_paths(args.paths, check=args.check, diff=args.diff, out=out)
    if args.command == "test":
        from memlineage_dsl.commands import test_command

        return test_command(args.paths, out, verbose=args.verbose, each=args.each)
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
