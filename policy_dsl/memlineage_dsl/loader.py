"""Files and directories -> parsed modules of one policy set, includes resolved.

`include "x.mlp"` is resolved relative to the including file; each file is
loaded once however many times it is included; a cycle is an error at the
include that closes it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from . import ast as A
from .diagnostics import Diagnostic, Severity, SourceFile, source_text
from .parser import parse_source


@dataclass
class LoadedSet:
    """Every module of a policy set, the sources (for diagnostics) and errors."""

    modules: list[A.Module] = field(default_factory=list)
    sources: dict[str, SourceFile] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)


def collect_files(paths: Iterable[str]) -> list[str]:
    """Expand directories into their `.mlp` files (recursively), each directory's in
    path order (`a/x.mlp` before `b.mlp`), the order `pipeline.lint_set` loads a set
    in: equal-priority rules are planned in load order, so one order everywhere."""
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            found = [
                os.path.join(root, f)
                for root, _, files in os.walk(p)
                for f in files
                if f.endswith(".mlp")
            ]
            out.extend(sorted(found, key=os.path.normpath))
        else:
            out.append(p)
    return out


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A file that could not be read, and why (said after `cannot read`)."""

    reason: str
    missing: bool = False  # there is no such file (an include then is "not found")

    @classmethod
    def of(cls, err: OSError | UnicodeDecodeError) -> Unreadable:
        """The system's reason (`No such file or directory`), or the first byte that
        is not UTF-8: what `cat` or an editor would say, not Python's exception text."""
        if isinstance(err, UnicodeDecodeError):
            return cls(f"not UTF-8 (byte {err.start})")
        return cls(err.strerror or str(err), isinstance(err, FileNotFoundError))


Text = str | Unreadable | None
"""A file's text; Unreadable (or None, without a reason) when it cannot be read."""
Reader = Callable[[str], Text]  # path -> its text


def _norm(path: str) -> str:
    return os.path.normpath(path)


def read_regular(path: str) -> bytes:
    """The bytes of `path`, which must be a regular file: anything else (a FIFO, which
    blocks its reader until a writer comes, a link to `/dev/zero`, which never ends) is
    an OSError saying so. Opened without blocking, so a FIFO is refused, not waited on."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO, device or socket"
            raise OSError(errno.EINVAL, f"not a regular file ({kind})")
        return fh.read()


def read_file(path: str) -> str | Unreadable:
    """The UTF-8 text of a file on disk (newlines as Python's text mode reads them), or
    why it cannot be read."""
    try:
        text = read_regular(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        return Unreadable.of(err)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_files(paths: Iterable[str]) -> dict[str, str | Unreadable]:
    """`path -> text` (or why not) for the `.mlp` files of files and directories."""
    return {f: read_file(f) for f in collect_files(paths)}


def load_texts(texts: Mapping[str, Text], read: Reader | None = None) -> LoadedSet:
    """Load a policy set from texts (path -> text; Unreadable or None: a file that could
    not be read), loading the roots in the order given. An include is looked up among
    the texts, then with `read` when given (the CLI reads disk; a server never does)."""
    table: dict[str, Text] = {}
    for path, text in texts.items():
        table.setdefault(_norm(path), text)

    def lookup(path: str) -> Text:
        if path in table:
            return table[path]
        return read(path) if read is not None else None

    return _Loader(lookup).load(list(texts))


def load_paths(paths: Iterable[str]) -> LoadedSet:
    """Load a policy set from files and directories on disk."""
    return _Loader(read_file).load(collect_files(paths))


class _Loader:
    """Depth-first, in include order, without recursion (a chain of includes may be
    as long as the number of files)."""

    def __init__(self, read: Reader) -> None:
        self.read = read
        self.out = LoadedSet()
        self.done: set[str] = set()

    def load(self, roots: list[str]) -> LoadedSet:
        for root in roots:
            self._load_tree(_norm(root))
        self.out.diagnostics.sort(key=Diagnostic.sort_key)
        return self.out

    def _load_tree(self, root: str) -> None:
        # ("enter", path, the include naming it) / ("leave", path, None)
        todo: list[tuple[str, str, tuple[SourceFile, A.Include] | None]] = [("enter", root, None)]
        chain: list[str] = []  # the files being loaded, outermost first
        on_chain: set[str] = set()
        while todo:
            action, path, at = todo.pop()
            if action == "leave":
                chain.pop()
                on_chain.discard(path)
                continue
            if path in on_chain and at is not None:  # a root is never on the chain
                including, inc = at
                cycle = " -> ".join([*chain[chain.index(path) :], path])
                self.out.diagnostics.append(
                    including.diag(
                        "E005", inc.span, f"include cycle: {cycle}", "remove one of the includes"
                    )
                )
                continue
            if path in self.done:
                continue
            self.done.add(path)
            module, src = self._parse(path, at)
            if module is None or src is None:
                continue
            chain.append(path)
            on_chain.add(path)
            todo.append(("leave", path, None))
            includes = [item for item in module.items if isinstance(item, A.Include)]
            for item in reversed(includes):
                target = _norm(os.path.join(os.path.dirname(path), item.path))
                todo.append(("enter", target, (src, item)))

    def _parse(
        self, path: str, at: tuple[SourceFile, A.Include] | None
    ) -> tuple[A.Module | None, SourceFile | None]:
        text = self.read(path)
        if not isinstance(text, str):
            why = f": {text.reason}" if isinstance(text, Unreadable) else ""
            if at is None:
                self.out.diagnostics.append(
                    Diagnostic(
                        "E006",
                        Severity.ERROR,
                        f"cannot read `{path}`{why}",
                        path,
                        A.Span(1, 1, 1, 1),
                        "",
                        "check the path and that it is UTF-8",
                    )
                )
            else:  # as a server, which reads no include from disk, says it: not found
                src, inc = at
                found = isinstance(text, Unreadable) and not text.missing
                self.out.diagnostics.append(
                    src.diag(
                        "E004",
                        inc.span,
                        f"included file `{inc.path}` "
                        + (f"cannot be read{why}" if found else "not found"),
                        f"looked for `{path}`",
                    )
                )
            return None, None
        text = source_text(text)
        src = SourceFile(path, text)
        self.out.sources[path] = src
        module, diags = parse_source(text, path)
        self.out.modules.append(module)
        self.out.diagnostics.extend(diags)
        return module, src
