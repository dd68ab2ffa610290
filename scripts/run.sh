#!/usr/bin/env bash
# The README's run command: set up the venv and serve the sidecar on the
# embedded store with the bundled policies (127.0.0.1:50051 unless overridden:
# any `memlineage serve` flag can be appended, e.g. --listen 0.0.0.0:50051).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
ensure_venv ""
exec .venv/bin/memlineage serve --policies policies "$@"
