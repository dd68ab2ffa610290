"""docs/configuration.md (`render_docs`, `memlineage config docs`) and `config show`,
generated from `SETTINGS`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from memlineage.config.definition import Config
from memlineage.config.help import SECTIONS
from memlineage.config.kinds import BOOL
from memlineage.config.settings import SETTINGS, Setting, value_of

# ------------------------------------------------------------------ docs and show


def _doc_default(s: Setting) -> str:
    if s.default is None:
        return "unset"
    return f"`{s.kind.toml(s.default)}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _section_rows(settings: Iterable[Setting]) -> list[str]:
    rows = [
        "| key | type | default | environment | flag | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for s in settings:
        flag = ", ".join(f"`{f}`" for f in (s.flag, *s.aliases))
        if s.kind is BOOL:
            flag = f"`{s.flag}` / `--no-{s.flag[2:]}`"
        kind = s.kind.name + (": " + ", ".join(f"`{c}`" for c in s.choices) if s.choices else "")
        key = s.key.rpartition(".")[2]
        rows.append(
            f"| `{key}` | {_cell(kind)} | {_cell(_doc_default(s))} | `{s.env}` | {flag} "
            f"| {_cell(s.help)}{' (a secret)' if s.secret else ''} |"
        )
    return rows


def render_docs() -> str:
    """docs/configuration.md, generated from SETTINGS (`memlineage config docs`)."""
    kinds = sorted({id(s.kind): s.kind for s in SETTINGS}.values(), key=lambda k: k.name)
    out = [
        "# Configuration",
        "",
        "<!-- Generated from server/memlineage/config/ by `memlineage config docs >",
        "docs/configuration.md`; tests/test_config_docs.py fails when this file is stale. -->",
        "",
        "Every setting can be given in three ways, and a later one wins, key by key:",
        "",
        "1. the TOML file: `memlineage serve --config FILE` (or `$MEMLINEAGE_CONFIG`);",
        "   `[scoring]` keys in a `[scoring]` table, tokens as `[tokens.NAME]` tables;",
        "   an unknown key is an error that names it;",
        "2. the environment: `MEMLINEAGE_<KEY>` (`MEMLINEAGE_SCORING_<KEY>` for `[scoring]`);",
        "   an empty variable counts as unset;",
        "3. a flag of `memlineage serve`: `--<key-with-dashes>` (`--scoring-<key>`).",
        "",
        "So the precedence is defaults < file < environment < flags. A table or list",
        "(`tokens`, `scoring.half_lives`, ...) is one value: a later route replaces it",
        "whole. `memlineage config show` takes the same `--config` and flags as `serve`",
        "and prints every value with where it came from (secrets hidden). A bad value",
        "stops the sidecar with one line naming the file and key, the variable or the",
        "flag, e.g.",
        "`error: configuration: MEMLINEAGE_METRICS_PORT: must be an integer, got 'abc'`;",
        "a file's problems are all named at once, an unknown key with the nearest setting.",
        "The file must be a UTF-8 regular file of at most 16 MiB: a directory, a device",
        "(`/dev/zero`), a FIFO, a larger file or one not UTF-8 is refused with its path.",
        "",
        "`deploy/memlineage.toml` is an example file.",
        "",
        "## Value forms",
        "",
        "| type | in the file | in the environment and flags |",
        "|---|---|---|",
        *[f"| {k.name} | {_cell(_FILE_FORMS[k.name])} | {_cell(k.text_form)} |" for k in kinds],
        "",
        "A setting whose default is *unset* cannot be unset again by a later route.",
        "",
    ]
    for sid, title, intro in SECTIONS:
        level = "##"
        if sid.startswith("scoring-"):
            level = "###"
            if sid == "scoring-reliability":
                out += _SCORING_DOC
        rows = _section_rows(s for s in SETTINGS if s.section == sid)
        out += [f"{level} {title}", "", intro, "", *rows, ""]
        if sid == "auth":
            out += _TOKENS_DOC
    return "\n".join(out).rstrip("\n") + "\n"


_FILE_FORMS = {
    "string": '`"text"`',
    "integer": "`16`",
    "number": "`2.0`, `60`, `inf`",
    "boolean": "`true` / `false`",
    "table of numbers": "`[scoring.half_lives]` with `NAME = NUMBER` lines, or `{ NAME = NUMBER }`",
    "list of [pattern, number]": '`[["user:*", 0.9], ["*", 0.5]]`',
    "token tables": "`[tokens.NAME]` tables (below)",
}

_TOKENS_DOC = [
    "### Tokens",
    "",
    "A caller sends `authorization: Bearer TOKEN`; the token decides the namespaces it",
    "may use, and an admin token may also list, reload and lint policies. In the",
    "file, one table per token; `NAME` is how logs name the caller:",
    "",
    "```toml",
    "[tokens.travel-agent]",
    'token = "change-me-agent"',
    'namespaces = ["default"]   # a list of strings; default: none',
    'speaks_as = ["agent:*", "tool:*"]   # default: [] (any identity)',
    "",
    "[tokens.chat-frontend]",
    'token = "change-me-frontend"',
    'namespaces = ["default"]',
    "",
    "[tokens.ops]",
    'token = "change-me-ops"',
    "admin = true               # default: false",
    "```",
    "",
    "`speaks_as` lists the identities (`KIND:NAME` globs, KIND one of user, tool,",
    "reasoning, agent, system or `*`) a token's caller may state as a memory's",
    "creator or as a request's actor; a request stating another, or leaving the",
    "actor to default to the namespace's user, is PERMISSION_DENIED naming the field",
    "(`memory.creator.id` or `actor`), and nothing is written. Without it a token may",
    "state any identity: the process holding it is trusted to say who spoke. Give",
    "the agent runtime's process a token that speaks only as `agent:*` and `tool:*`",
    "and the process that hears the user one that may speak as `user:*`: then",
    "nothing in the agent's process, which runs tools and reads their output, can",
    "record the user's words, revise a memory into the user's, or grant and object",
    "as the user. The adapters and what their tokens must allow: docs/integrations.md,",
    '"With a token that has `speaks_as`".',
    "",
    "In `MEMLINEAGE_TOKENS` (or `--tokens`), entries `TOKEN=NS1,NS2` joined by `;`,",
    "where the namespace entry `admin` makes an admin token and each `as=KIND:NAME`",
    "entry an identity it speaks as; logs name them `env0`, `env1`, ... (`flag0`,",
    "... from the flag):",
    "",
    "```sh",
    'MEMLINEAGE_TOKENS="change-me-agent=default,as=agent:*,as=tool:*;change-me-ops=admin"',
    "```",
    "",
    "A token's value is a secret: prefer the environment (from a secret store) or a",
    "file only the sidecar can read to a flag, which other local users can see.",
    "",
    "Checked at start, each refused with the table or entry it is in: a value of 1 to",
    "4096 visible ASCII characters (no spaces), each value in one entry only, at least",
    "one namespace or admin per token, namespace names of letters, digits and `._:/-`;",
    "a value naming no token at all (only `;`) is refused rather than read as no",
    "tokens (which would serve without authentication).",
    "",
]

_SCORING_DOC = [
    "## Scoring: `[scoring]`",
    "",
    "Weights, half-lives, priors and thresholds of the scores (`server/memlineage/scoring/`).",
    "In the file these keys sit in a `[scoring]` table (any key left out keeps its",
    "default); the environment and flags name them with a `SCORING_` / `scoring-` prefix:",
    "",
    "```toml",
    "[scoring]",
    'default_volatility = "medium"',
    'credibility_priors = [["user:*", 0.95], ["tool:*", 0.7], ["*", 0.5]]',
    "alpha = 0.5",
    "",
    "[scoring.half_lives]     # replaces the whole default table",
    "high = 600",
    "medium = 86400",
    "low = inf",
    "```",
    "",
    "```sh",
    "MEMLINEAGE_SCORING_ALPHA=0.5",
    'MEMLINEAGE_SCORING_HALF_LIVES="high=600,medium=86400,low=inf"',
    "memlineage serve --scoring-credibility-priors 'user:*=0.95,*=0.5'",
    "```",
    "",
]


def render_show(cfg: Config, origins: Mapping[str, str]) -> str:
    """Every setting as `key = value  # origin` (secrets hidden): `memlineage config show`."""
    lines = []
    for s in SETTINGS:
        value = value_of(cfg, s.key)
        if value is None:
            lines.append(f"# {s.key} unset  # {origins.get(s.key, 'default')}")
            continue
        shown = '"<hidden>"' if s.secret and value else s.kind.toml(value)
        lines.append(f"{s.key} = {shown}  # {origins.get(s.key, 'default')}")
    return "\n".join(lines) + "\n"
