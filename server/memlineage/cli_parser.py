"""The `memlineage` command line's grammar: every subcommand, its arguments and their
types (`cli.py` runs what they ask)."""

from __future__ import annotations

import argparse
import os

from memlineage import __version__
from memlineage.cli_remote import count, named_path, rfc3339, seconds, target
from memlineage.config import add_setting_flags


def _percent(text: str) -> float:
    """A percentage in [0, 100] (`nan` passed every check; 101 failed every run)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 100.0:  # false for nan too
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage from 0 to 100")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="memlineage",
        description="Policy-as-code enforcement sidecar for the memory of LLM agents.",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    lint = sub.add_parser("lint", help="check .mlp files; exit 1 on any error")
    lint.add_argument("paths", nargs="+", type=named_path, help=".mlp files or directories")
    _format(lint, "json", "sarif")
    lint.add_argument("--each", action="store_true", help="treat every file as its own policy set")

    fmt = sub.add_parser("fmt", help="format .mlp files in place")
    fmt.add_argument("paths", nargs="+", type=named_path)
    fmt.add_argument(
        "--check", action="store_true", help="list files that would change; exit 1 if any"
    )
    fmt.add_argument("--diff", action="store_true", help="print a unified diff")

    test = sub.add_parser("test", help="run the test blocks of .mlp files")
    test.add_argument("paths", nargs="+", type=named_path)
    test.add_argument("-v", "--verbose", action="store_true")
    test.add_argument("--each", action="store_true", help="treat every file as its own policy set")
    test.add_argument(
        "--coverage",
        action="store_true",
        help="report the rules and conditions the tests exercised, per file",
    )
    test.add_argument(
        "--coverage-min",
        type=_percent,
        metavar="PERCENT",
        help="exit 1 when coverage is below PERCENT (implies --coverage)",
    )
    _format(test, "json")
    serve = sub.add_parser(
        "serve",
        help="run the sidecar (gRPC)",
        usage="%(prog)s [-h] [--config FILE] [--SETTING VALUE ...]",
        description="Run the sidecar. Settings: defaults < --config FILE < MEMLINEAGE_* "
        "environment < these flags (docs/configuration.md).",
    )
    add_setting_flags(serve)

    config = sub.add_parser("config", help="the sidecar's settings")
    config_sub = config.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    config_sub.add_parser(
        "docs", help="print docs/configuration.md, generated from the settings' definition"
    )
    show = config_sub.add_parser(
        "show",
        help="print every setting's value and where it came from (the same --config, "
        "environment and flags as serve; secrets hidden)",
        usage="%(prog)s [-h] [--config FILE] [--SETTING VALUE ...]",
    )
    add_setting_flags(show)

    def remote(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "--target",
            default=os.environ.get("MEMLINEAGE_TARGET") or "127.0.0.1:50051",
            type=target,
            help="sidecar HOST:PORT (default: $MEMLINEAGE_TARGET, else 127.0.0.1:50051)",
        )
        sp.add_argument("--token", help="bearer token (default: $MEMLINEAGE_TOKEN)")
        sp.add_argument(
            "--namespace",
            default="",
            help="namespace (default: "
            + ("every namespace" if sp.prog.endswith(" sweep") else "the caller's")
            + ")",
        )
        sp.add_argument(
            "--timeout", type=seconds, default=5.0, help="seconds to wait for an answer (5)"
        )
        sp.add_argument(
            "--tls-ca",
            metavar="PEM",
            help="speak TLS to the sidecar, trusting this CA (or self-signed) certificate",
        )

    check = sub.add_parser(
        "check", help="ask the sidecar for one decision (exit 0 allow/degrade, 3 deny)"
    )
    check.add_argument("operation", choices=("read", "write", "update", "delete", "derive", "act"))
    check.add_argument("memory_ids", nargs="+", metavar="MEMORY_ID")
    check.add_argument("--actor", help="kind:id of who asks, e.g. tool:flight_api")
    check.add_argument(
        "--budget",
        type=float,
        help="what the caller may still spend (policies read request.budget)",
    )
    check.add_argument("--action", default="", help="act: the tool or action name")
    check.add_argument(
        "--historical",
        action="store_true",
        help="ask as a historical query (archived memories answer as history)",
    )
    _format(check, "json")
    check.add_argument(
        "--json", dest="format", action="store_const", const="json", help="--format json"
    )
    remote(check)

    explain = sub.add_parser("explain", help="a memory's lineage graph and recent decisions")
    explain.add_argument("memory_id")
    explain.add_argument(
        "--format",
        choices=("text", "dot", "mermaid", "prov"),
        default="text",
        help="prov: W3C PROV-JSON (memlineage/prov_export.py)",
    )
    explain.add_argument(
        "--depth",
        type=count,
        default=0,
        help="ancestor/descendant depth (0: the sidecar's default, 8; at most its store's "
        "walk limit, 64 unless configured)",
    )
    remote(explain)
    sweep = sub.add_parser(
        "sweep",
        help="one lifecycle governance pass (archive / evict by "
        "value): on the running sidecar, or directly on a store",
    )
    sweep.add_argument("--batch", type=count, default=1000, help="memories per namespace")
    sweep.add_argument(
        "--store",
        help="run on this store directly (redis://…, "
        "embedded:///dir not in use by a server) instead of over gRPC",
    )
    sweep.add_argument("--config", help="TOML configuration (scoring thresholds)")
    sweep.add_argument(
        "--at",
        type=rfc3339,
        metavar="TIME",
        help="sweep at this RFC 3339 time (2026-01-13T09:00:00Z): a sidecar serving "
        "--simulation only (docs/simulation.md)",
    )
    remote(sweep)

    store = sub.add_parser(
        "store", help="the embedded store's data directory (offline or while a server runs on it)"
    )
    store_sub = store.add_subparsers(dest="store_command", required=True, metavar="ACTION")
    store_check = store_sub.add_parser(
        "check", help="check a data directory read-only (exit 0 and a summary; 1 and the problem)"
    )
    store_check.add_argument("dir", metavar="DIR")
    store_backup = store_sub.add_parser(
        "backup", help="copy a data directory's database into the new directory DEST (online)"
    )
    store_backup.add_argument("dir", metavar="DIR")
    store_backup.add_argument("dest", metavar="DEST")

    dlog = sub.add_parser("log", help="the decision log (serve --decision-log FILE)")
    dlog_sub = dlog.add_subparsers(dest="log_command", required=True, metavar="ACTION")
    verify = dlog_sub.add_parser(
        "verify",
        help="check the hash chain of decision-log files, "
        "oldest first (exit 0 intact; 1 FILE:LINE of the first bad "
        "line; 2 unreadable)",
    )
    verify.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="in write order, e.g. decisions.log.2 decisions.log.1 decisions.log",
    )
    verify.add_argument(
        "--key",
        help="the HMAC key the log was written with (default: $MEMLINEAGE_DECISION_LOG_KEY)",
    )
    verify.add_argument(
        "--partial",
        action="store_true",
        help="accept a chain that starts after its genesis (seq 0): the older files were "
        "rotated away (without it, a missing head is reported: lines may have been removed)",
    )
    shadow = sub.add_parser(
        "shadow",
        help="the candidate policy set deciding beside the serving one: status (the diff "
        "table), load [DIR], promote, drop",
    )
    shadow.add_argument("action", choices=("status", "load", "promote", "drop"))
    shadow.add_argument(
        "dir",
        nargs="?",
        help="load: a policy directory sent to the sidecar (default: its shadow_policy_dir)",
    )
    remote(shadow)
    replay = sub.add_parser(
        "replay",
        help="re-decide logged decisions against candidate policies and print what changes "
        "(effects, obligations under the same effect, scores: what the shadow counts as a "
        "disagreement) (exit 1 when a --fail-on change occurs, or with --fail-on approximations "
        "a decision is replayed approximately, 2 when the input cannot be read, "
        "the candidate is a set the sidecar would refuse (errors, a failing test block, "
        "no policy) or a --fail-on replay found nothing to replay)",
    )
    replay.add_argument("files", nargs="+", metavar="LOG", help="decision-log files")
    replay.add_argument(
        "--policies", required=True, metavar="DIR", help="the candidate policy directory"
    )
    replay.add_argument(
        "--fail-on",
        default="",
        metavar="FROM->TO,...",
        help="what fails the run: effect transitions (allow->deny), `obligations` "
        "(the same effect with other obligations), `any` (all of those), and "
        "`approximations` (a decision the candidate could not re-decide exactly: it read a "
        "rate counter or a score the logged decision had not; not part of `any`)",
    )
    replay.add_argument(
        "--jobs", type=int, default=0, help="processes replaying in parallel (0: one per core)"
    )
    replay.add_argument(
        "--verify",
        action="store_true",
        help="first check the logs' hash chain as `log verify` does (files oldest first); "
        "a broken chain: its FILE:LINE, exit 2, nothing replayed",
    )
    replay.add_argument(
        "--key",
        help="--verify: the log's HMAC key (default: $MEMLINEAGE_DECISION_LOG_KEY)",
    )
    replay.add_argument(
        "--partial",
        action="store_true",
        help="--verify: accept a chain starting after its genesis (older files rotated away)",
    )
    simulate = sub.add_parser(
        "simulate",
        help="run a JSON-lines script of steps in simulated time, in process (no server): "
        "print each decision and status change (exit 2: SCRIPT:LINE of a bad step)",
        description="Days of an agent's life in seconds (docs/simulation.md).",
    )
    simulate.add_argument("script", metavar="SCRIPT", help="JSON lines, one step each")
    simulate.add_argument(
        "--policies", default=None, metavar="DIR", help="policy directory (default: the bundled)"
    )
    simulate.add_argument("--format", choices=("text", "json"), default="text")
    return p


def _format(command: argparse.ArgumentParser, *machine: str) -> None:
    """`--format`, one spelling across commands: `text` (the default; `human` is its
    older name, still taken) or a machine format (json, sarif, ...)."""
    command.add_argument(
        "--format",
        choices=("text", "human", *machine),
        default="text",
        help=f"text (default; also `human`) or {' or '.join(machine)}",
    )


def innermost(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)command's own parser that `args` went through, for its usage line."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None) or "")
            if isinstance(chosen, argparse.ArgumentParser):
                return innermost(chosen, args)
    return parser
