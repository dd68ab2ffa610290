#!/usr/bin/env bash
# The README's run command: set up the venv and run MemLineage with the bundled
# policies. Until the gRPC sidecar lands (issue "The sidecar"), "running" means
# compiling the bundled policy set, linting it and running its tests.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
ensure_venv ""
.venv/bin/memlineage lint policies
.venv/bin/memlineage test policies
