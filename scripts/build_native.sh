#!/usr/bin/env bash
# Rebuilds the compiled hot path (setup.py: mypyc) into this checkout, after its
# sources changed. With MEMLINEAGE_PURE_PYTHON=1 it removes the compiled modules
# instead, and the same modules run as plain Python.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
build_native
