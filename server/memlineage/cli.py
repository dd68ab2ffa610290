"""The one `memlineage` command: subcommands dispatch to small adapters.

Language commands (`lint`, `fmt`, `test`) live in `memlineage_dsl`; the
sidecar's commands are added beside them as they land.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from memlineage.cli_parser import innermost, parser
from memlineage.cli_remote import remote_client, remote_error


def _simulate(args: argparse.Namespace) -> int:
    from memlineage.simulate import bundled_policies, simulate_command

    policies = args.policies or bundled_policies()
    return simulate_command(args.script, policies, args.format, sys.stdout, sys.stderr)


def _log(args: argparse.Namespace) -> int:
    import os

    from memlineage.engine.log_verify import verify_command

    return verify_command(
        args.files,
        args.key or os.environ.get("MEMLINEAGE_DECISION_LOG_KEY"),
        partial=args.partial,
    )


def _store(args: argparse.Namespace) -> int:
    from memlineage.lineage.errors import StoreUnavailableError
    from memlineage.store.embedded import persistence

    where = args.dir
    if "://" in where:  # a store URL, not a directory (an outside audit typed one)
        print(
            f"error: store {args.store_command} DIR takes an embedded store's data "
            f"directory, not the store URL {where!r}; a Redis store is checked and backed "
            "up by Redis's own tools (redis-check-aof, redis-check-rdb, BGSAVE), see "
            "docs/operating.md",
            file=sys.stderr,
        )
        return 2
    try:
        if args.store_command == "check":
            summary = persistence.check(args.dir)
        else:
            summary = persistence.backup(args.dir, args.dest)
            print(f"backed up {args.dir} into {args.dest}")
    except (persistence.StoreCorruptError, StoreUnavailableError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # PATH: reason, not "[Errno 20] ...: 'PATH'"
        from memlineage.oserrors import said

        print(f"error: {said(exc)}", file=sys.stderr)
        return 1
    print(summary.describe())
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from memlineage.client import MemLineageError

    if args.store and args.at is not None:
        print(
            "error: --at: a sweep at another time runs on a sidecar serving --simulation, "
            "not on a store directly",
            file=sys.stderr,
        )
        return 2
    if args.store:
        from memlineage.config import ConfigError, load_config
        from memlineage.lifecycle.sweep import sweep
        from memlineage.lineage.clock import system_clock
        from memlineage.store import open_store

        try:
            cfg = load_config(args.config).scoring
        except ConfigError as exc:
            print(f"error: configuration: {exc}", file=sys.stderr)
            return 2
        from memlineage.store.embedded.persistence import DB_NAME

        where = args.store.removeprefix("embedded://")
        if where != args.store and not (Path(where) / DB_NAME).is_file():
            # a sweep of a store that is not there would create an empty one, and report
            # that it examined nothing: a mistyped path looked like success
            print(f"error: --store: no embedded store in {where} ({DB_NAME})", file=sys.stderr)
            return 2
        try:
            store = open_store(args.store)
        except ValueError as exc:
            print(f"error: --store: {exc}", file=sys.stderr)
            return 2
        with store:
            report = sweep(
                store, cfg, system_clock(), namespace=args.namespace or None, batch=args.batch
            )
        rows = [(t.memory_id, t.from_status, t.to_status, t.reason) for t in report.transitions]
        refused = [(t.memory_id, t.from_status, t.to_status, t.reason) for t in report.refused]
        examined = report.examined
    else:
        from memlineage.grpc_api.serde import STATUS_TO_PB

        names = {v: k for k, v in STATUS_TO_PB.items()}
        try:
            with remote_client(args) as client:
                out = client.run_sweep(args.namespace, args.batch, args.at)
        except MemLineageError as exc:
            remote_error(exc, args)
            return 1
        rows = [
            (t.memory_id, names.get(t.from_status, "?"), names.get(t.to_status, "?"), t.reason)
            for t in out.transitions
        ]
        refused = [
            (t.memory_id, names.get(t.from_status, "?"), names.get(t.to_status, "?"), t.reason)
            for t in out.refused
        ]
        examined = out.examined
    for mid, a, b, why in rows:
        print(f"{mid}: {a} -> {b} ({why})")
    for mid, a, _b, why in refused:
        print(f"{mid}: stays {a}, {why}")
    print(f"examined {examined}, {len(rows)} moved, {len(refused)} refused")
    return 0


def _check(args: argparse.Namespace) -> int:
    from google.protobuf.json_format import MessageToJson

    from memlineage.client import MemLineageError
    from memlineage.v1 import memlineage_pb2 as pb

    try:
        with remote_client(args) as client:
            d = client.check(
                args.operation,
                # several ids for one that takes one: the client refuses it, never
                # quietly deciding on the first
                args.memory_ids
                if args.operation == "act" or len(args.memory_ids) > 1
                else args.memory_ids[0],
                actor=args.actor,
                budget=args.budget,
                action=args.action,
                historical=args.historical,
            )
    except MemLineageError as exc:
        remote_error(exc, args)
        return 1
    except ValueError as exc:  # the client's own check of a value the command line gave
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(MessageToJson(d, preserving_proto_field_name=True))
    else:
        effect = pb.Effect.Name(d.effect).removeprefix("EFFECT_")
        print(
            f"{effect}  score {d.compliance_score:.3f}  cost {d.expected_cost:g}  "
            f"decision {d.decision_id}  policies {d.policy_version}"
        )
        for o in d.obligations:
            arg = o.source or o.text or (f"{o.factor:g}" if o.factor else "")
            print(f"  obligation {o.kind}({arg})  [{o.policy}]")
        for r in d.reasons:
            print(f"  {r.status:<10} {r.policy}: {r.message}")
        shown = {r.message for r in d.reasons if r.status == "error"}
        for e in d.errors:  # each rule's error is its reason's message: printed above
            if e not in shown:
                print(f"  error      {e}")
    return 3 if d.effect == pb.EFFECT_DENY else 0


def _policy_base(where: str) -> str:
    """The directory the files of `where` are named relative to (`_policy_files`)."""
    return where if os.path.isdir(where) else os.path.dirname(where) or "."


def _policy_files(where: str) -> tuple[dict[str, str], str]:
    """The `.mlp` files of `where` (a directory or one file) to send, named relative to
    it, so the server versions the set as `serve --policy-dir` of that directory
    would, however the path was typed; or the problem (no file: the server would take
    its own shadow_policy_dir instead; a file that is not UTF-8)."""
    from memlineage_dsl.loader import collect_files

    base = _policy_base(where)
    files: dict[str, str] = {}
    for path in collect_files([where]):
        try:
            text = Path(path).read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            return {}, f"{path}: not UTF-8 (byte {exc.start}: {exc.reason})"
        files[Path(os.path.relpath(path, base)).as_posix()] = text
    if not files:
        return {}, f"{where}: no .mlp file to load"
    return files, ""


def _shadow(args: argparse.Namespace) -> int:
    from memlineage.client import MemLineageError
    from memlineage.v1 import memlineage_pb2 as pb

    files = None
    if args.action == "load" and args.dir:
        files, refused = _policy_files(args.dir)
        if refused:
            print(f"error: {refused}", file=sys.stderr)
            return 2
    try:
        with remote_client(args) as client:
            out = client.shadow(args.action, files)
    except MemLineageError as exc:
        remote_error(exc, args)
        return 1
    for problem in out.diagnostics:
        text = problem.rendered or f"{problem.file}:{problem.line}: {problem.message}"
        if files and problem.file in files:  # the file as the user names it, not as sent
            local = os.path.join(_policy_base(args.dir), problem.file)
            text = text.replace(f"{problem.file}:", f"{local}:", 1)
        print(text)
    print(f"serving {out.serving_version}")
    if not out.active:
        print("no shadow candidate" + (" (not loaded: errors above)" if out.diagnostics else ""))
        return 1 if args.action == "load" else 0
    print(f"shadow {out.version}: {out.compared} compared, {out.disagreed} disagreed")
    name = pb.Effect.Name
    for d in out.diffs:
        a, b = name(d.serving).removeprefix("EFFECT_"), name(d.candidate).removeprefix("EFFECT_")
        a, b = a.lower(), b.lower()
        if d.serving_obligations or d.candidate_obligations:
            a += f" [{', '.join(d.serving_obligations)}]"
            b += f" [{', '.join(d.candidate_obligations)}]"
        print(f"  {d.policy}: {a} -> {b}  {d.count}  e.g. {'; '.join(d.examples)}")
    return 0


def _explain(args: argparse.Namespace) -> int:
    from memlineage import graph_export, prov_export
    from memlineage.client import MemLineageError

    try:
        with remote_client(args) as client:
            ex = client.explain(
                args.memory_id, ancestor_depth=args.depth, descendant_depth=args.depth
            )
    except MemLineageError as exc:
        details = str(getattr(exc, "details", "") or "")
        field, sep, problem = details.partition(": ")
        if sep and field in ("ancestor_depth", "descendant_depth"):  # the flag, not the field
            print(f"error: --depth {args.depth}: {problem}", file=sys.stderr)
            return 2
        remote_error(exc, args)
        return 1
    render = {
        "text": graph_export.to_text,
        "dot": graph_export.to_dot,
        "mermaid": graph_export.to_mermaid,
        "prov": prov_export.to_prov_json,
    }[args.format]
    sys.stdout.write(render(ex).rstrip("\n") + "\n")
    return 0


def _config(args: argparse.Namespace) -> int:
    from memlineage.config import (
        ConfigError,
        flag_overrides,
        render_docs,
        render_show,
        resolve_config,
        typed_flags,
        unknown_env,
    )

    if args.config_command == "docs":
        sys.stdout.write(render_docs())
        return 0
    for warning in unknown_env():
        print(f"warning: configuration: {warning}", file=sys.stderr)
    try:
        cfg, origins = resolve_config(
            args.config, overrides=flag_overrides(args), flags=typed_flags(args)
        )
    except ConfigError as exc:
        print(f"error: configuration: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(render_show(cfg, origins))
    return 0


def _serve(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from memlineage.config import (
        ConfigError,
        flag_overrides,
        load_config,
        typed_flags,
        unknown_env,
    )
    from memlineage.engine.policies import PolicyLoadError
    from memlineage.sidecar import run

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    for warning in unknown_env():
        print(f"warning: configuration: {warning}", file=sys.stderr)
    try:
        config = load_config(args.config, overrides=flag_overrides(args), flags=typed_flags(args))
        asyncio.run(run(config))
    except ConfigError as exc:
        print(f"error: configuration: {exc}", file=sys.stderr)
        return 2
    except PolicyLoadError as exc:
        for d in exc.diagnostics:
            print(f"{d.location}: {d.severity}[{d.code}]: {d.message}", file=sys.stderr)
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0  # a store's or the OS's error: one line by `main`


def _human(format_name: str) -> str:
    """The language's commands call the text format `human`."""
    return "human" if format_name == "text" else format_name


def main(argv: Sequence[str] | None = None) -> int:
    """The CLI: one line on stderr for what a user can mend (a store that cannot be
    opened or reached, a file that cannot be read), never a traceback; a closed pipe
    (``| head``) ends quietly."""
    from memlineage.lineage.errors import LineageError

    # gRPC's core logs each failed TLS handshake as INFO lines on stderr (a client's
    # before the one line the CLI prints about it; a server's per refused client): its
    # errors only, unless the user set the variable. Read when gRPC is first imported.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    try:
        return _main(argv)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush goes nowhere
        return 141  # as a shell reports a process ended by SIGPIPE
    except KeyboardInterrupt:  # Ctrl-C before serve's handler (before: a traceback)
        print("interrupted", file=sys.stderr)
        return 130  # as a shell reports a process ended by SIGINT
    except LineageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        from memlineage.oserrors import said

        print(f"error: {said(exc)}", file=sys.stderr)
        return 1


def _main(argv: Sequence[str] | None = None) -> int:
    top = parser()
    args, extra = top.parse_known_args(argv)
    if extra:  # the subcommand's usage, not the top one's (`serve --listn x`)
        from memlineage.nearest import nearest

        own = innermost(top, args)
        flags = [o for a in own._actions for o in a.option_strings if o.startswith("--")]
        near = [m for x in extra if x.startswith("--") if (m := nearest(x, flags)) is not None]
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        own.error(f"unrecognized arguments: {' '.join(extra)}{hint}")
    out = sys.stdout
    if args.command == "lint":
        from memlineage_dsl.commands import lint_command

        return lint_command(args.paths, _human(args.format), out, each=args.each)
    if args.command == "fmt":
        from memlineage_dsl.fmt_command import fmt_paths

        return fmt_paths(args.paths, check=args.check, diff=args.diff, out=out)
    if args.command == "test":
        from memlineage_dsl.commands import test_command

        return test_command(
            args.paths,
            out,
            verbose=args.verbose,
            each=args.each,
            coverage=args.coverage,
            coverage_min=args.coverage_min,
            fmt=_human(args.format),
        )
    if args.command == "serve":
        return _serve(args)
    if args.command == "config":
        return _config(args)
    if args.command == "check":
        return _check(args)
    if args.command == "explain":
        return _explain(args)
    if args.command == "sweep":
        return _sweep(args)
    if args.command == "store":
        return _store(args)
    if args.command == "log":
        return _log(args)
    if args.command == "shadow":
        return _shadow(args)
    if args.command == "simulate":
        return _simulate(args)
    if args.command == "replay":
        from memlineage.engine.replay import replay_command

        key = args.key or (os.environ.get("MEMLINEAGE_DECISION_LOG_KEY") if args.verify else None)
        return replay_command(
            args.files,
            args.policies,
            args.fail_on,
            out,
            args.jobs,
            verify=args.verify,
            key=key,
            partial=args.partial,
        )
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
