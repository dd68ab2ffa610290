# Sourced by scripts/test.sh and scripts/run.sh: idempotent environment setup.
# ensure_venv EXTRAS  -> .venv with the project installed editable (+ extras)
# ensure_redis        -> redis-server and redis-cli on PATH (Debian package when root)
# ensure_openssl      -> openssl on PATH (the TLS test makes a throwaway certificate)
# ensure_protoc       -> .venv-protoc, the pinned generator of scripts/gen_proto.py
# ensure_range_venv DIR [CONSTRAINTS]
#                     -> a second venv DIR with the project (no extras) and pytest,
#                        pinned by CONSTRAINTS (e.g. constraints-lowest.txt)

ensure_venv() {
    local extras="${1:-}"
    if [ ! -x .venv/bin/python ]; then
        python3 -m venv .venv
    fi
    local spec="."
    [ -n "$extras" ] && spec=".[$extras]"
    # Re-install only when pyproject.toml changed since the last install.
    local stamp=".venv/.installed-$(sha1sum pyproject.toml | cut -c1-12)-${extras:-none}"
    if [ ! -f "$stamp" ]; then
        .venv/bin/python -m pip install -q --upgrade pip >/dev/null
        .venv/bin/python -m pip install -q -e "$spec"
        touch "$stamp"
    fi
}

ensure_redis() {
    if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
        return 0
    fi
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing redis-server (Debian package) for the Redis tests..." >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server >/dev/null 2>&1 \
            || { apt-get update -q >/dev/null 2>&1 && \
                 DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server >/dev/null; }
        # The package starts a system service on 6379; the tests start their own.
        (service redis-server stop || true) >/dev/null 2>&1
        return 0
    fi
    echo "error: redis-server is required by the test suite (real Redis, no mocks)." >&2
    echo "       install it (Debian/Ubuntu: sudo apt-get install redis-server) and re-run." >&2
    return 1
}

ensure_openssl() {
    command -v openssl >/dev/null 2>&1 && return 0
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q openssl >/dev/null 2>&1 \
            || { apt-get update -q >/dev/null 2>&1 && \
                 DEBIAN_FRONTEND=noninteractive apt-get install -y -q openssl >/dev/null; }
        return 0
    fi
    echo "error: openssl is required by the TLS test; install it and re-run." >&2
    return 1
}

ensure_protoc() {
    python3 scripts/gen_proto.py --tools-only
}

ensure_range_venv() {
    local dir="$1" constraints="${2:-}"
    local key
    key="$(cat pyproject.toml ${constraints:+"$constraints"} | sha1sum | cut -c1-12)"
    local stamp="$dir/.installed-$key"
    [ -f "$stamp" ] && return 0
    rm -rf "$dir"
    python3 -m venv "$dir"
    # pip's chatter goes to a log, shown only when the install fails.
    { "$dir/bin/python" -m pip install -q --upgrade pip \
        && "$dir/bin/python" -m pip install -q -e . pytest ${constraints:+-c "$constraints"} \
        && "$dir/bin/python" -m pip check; } >"$dir/install.log" 2>&1 \
        || { cat "$dir/install.log" >&2; return 1; }
    touch "$stamp"
}
