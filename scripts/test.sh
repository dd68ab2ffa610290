#!/usr/bin/env bash
# The one test command (README.md, .ci/run): set up the venv, make sure a real
# redis-server is available, lint and format-check (ruff) and type-check (mypy)
# the code, lint the bundled policies, run pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
ensure_venv dev
ensure_redis
ensure_openssl
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/memlineage lint policies
.venv/bin/memlineage fmt --check policies
.venv/bin/memlineage test policies
.venv/bin/python -m pytest -q "$@"
