#!/usr/bin/env bash
# The one test command (README.md, .ci/run): set up the venv, make sure a real
# redis-server is available, lint and format-check (ruff) and type-check (mypy)
# the code, lint the bundled policies, run pytest (which also validates deploy/ and
# the policy CI example offline: tests/test_deploy.py). Without arguments it then runs
# the served tests again on the grpc.aio runtime, the transport's tests again on
# gRPC's poller before EventEngine, and the client and a served sidecar's
# API contract again in two more venvs: on the
# lowest supported dependencies (.venv-lowest, constraints-lowest.txt: protobuf
# 5.26.1, grpcio 1.64.0, ...) and on the newest ones pip resolves (.venv-newest,
# protobuf 7.x), the ends of the range pyproject.toml declares.
# Without arguments the two pytest passes of .venv run on two CPUs (pytest-xdist,
# -n 2 --dist loadfile: each test file whole on one worker, with its module state and
# in the order it was written; a session fixture such as the Redis servers starts once
# per worker; --no-loadscope-reorder: files handed out as tests/conftest.py orders them,
# the longest first), and the two range venvs' passes run side by side; with
# arguments, pytest runs them in one process, as given.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
# Setup in the background meanwhile, waited for before pytest starts (and, should a
# check below fail, before the script ends: nothing is left running): the pinned
# protobuf generator's venv from the start; without arguments, once .venv is there,
# the two range venvs, one after the other, as each install builds the project's
# editable wheel in this tree (memlineage.egg-info, which `python -m` finds from here).
background=()
trap 'for pid in "${background[@]}"; do wait "$pid" || true; done' EXIT
ensure_protoc &
background+=($!)
ensure_venv dev
ensure_redis
ensure_openssl
if [ "$#" -eq 0 ]; then
    { ensure_range_venv .venv-lowest constraints-lowest.txt
      ensure_range_venv .venv-newest; } &
    background+=($!)
fi
wait_background() {
    local pid
    for pid in "${background[@]}"; do wait "$pid"; done
    background=()
}
# The project's bytecode, written once: the suite starts a few hundred `memlineage`
# processes, and where PYTHONDONTWRITEBYTECODE is set (as on this project's machines)
# each of them compiled every module it imports anew; process-heavy test files ran
# about a fifth faster with it. Python still compares each file's time with its
# bytecode's, so an edited module is never run from stale bytecode.
.venv/bin/python -m compileall -q server policy_dsl >/dev/null
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/memlineage lint policies
.venv/bin/memlineage fmt --check policies
.venv/bin/memlineage test policies
wait_background
if [ "$#" -gt 0 ]; then
    .venv/bin/python -m pytest -q "$@"
    exit 0
fi
# Two workers, or one (no xdist) on a one-CPU machine: the fault tests' time bounds
# are checked with at most two suites' worth of load.
workers=$(( $(nproc) >= 2 ? 2 : 0 ))
PARALLEL=(-n "$workers" --dist loadfile --no-loadscope-reorder)
.venv/bin/python -m pytest -q "${PARALLEL[@]}"
# The served tests again with every sidecar on grpc_runtime = "aio" (the setting's
# own variable: in-process sidecars and `memlineage serve` both read it).
AIO_TESTS=(tests/e2e/test_api_contract.py tests/e2e/test_request_errors.py
           tests/e2e/test_request_fuzz.py tests/e2e/test_concurrent_serving.py
           tests/e2e/test_tls.py tests/e2e/test_metrics.py tests/e2e/test_tracing.py
           tests/e2e/test_serve_cli.py tests/e2e/test_store_outage.py
           tests/e2e/test_check_memo.py tests/e2e/test_act_gate.py tests/grpc_api
           tests/client/test_error_codes.py tests/client/test_async_client.py
           tests/integrations/test_langgraph_store.py
           tests/e2e/test_embedded_durability.py tests/e2e/test_redis_faults.py
           tests/e2e/test_flush_outage.py tests/e2e/test_token_identities.py)
echo "== the served tests on grpc_runtime = aio"
# (`any_runtime` tests check what the runtime does not touch: run once, above)
MEMLINEAGE_GRPC_RUNTIME=aio .venv/bin/python -m pytest -q -p no:cacheprovider \
    "${PARALLEL[@]}" -m "not any_runtime" "${AIO_TESTS[@]}"
# The transport's tests again with every process on gRPC's poller before EventEngine
# (docs/operating.md, "gRPC's poller": an operator's choice, read from the
# environment by the sidecars and clients these tests start and by pytest's own).
echo "== the transport's tests on GRPC_EXPERIMENTS=-event_engine_client,-event_engine_listener"
GRPC_EXPERIMENTS=-event_engine_client,-event_engine_listener .venv/bin/python -m pytest -q \
    -p no:cacheprovider "${PARALLEL[@]}" tests/grpc_api tests/client \
    tests/e2e/test_api_contract.py tests/e2e/test_tls.py
RANGE_TESTS=(tests/client tests/e2e/test_api_contract.py tests/test_dependency_bounds.py
             tests/test_proto_generated.py::test_committed_code_is_the_pinned_old_gencode)
range_pass() {  # VENV: its passes, in that venv's ports (support/redis_servers.py)
    local venv="$1"
    echo "== $venv: $("$venv/bin/python" -c 'import google.protobuf as p, grpc; print("protobuf", p.__version__, "grpcio", grpc.__version__)')"
    "$venv/bin/python" -m pytest -q -p no:cacheprovider "${RANGE_TESTS[@]}"
    MEMLINEAGE_GRPC_RUNTIME=aio "$venv/bin/python" -m pytest -q -p no:cacheprovider \
        tests/e2e/test_api_contract.py tests/grpc_api/test_aio_runtime.py
}
# The two venvs' passes side by side, each on its own part of the test ports; their
# output is shown whole, one venv after the other, once both have ended.
logs=$(mktemp -d)
PYTEST_MEMLINEAGE_PORTS=10000-14999 range_pass .venv-lowest >"$logs/lowest" 2>&1 &
lowest=$!
PYTEST_MEMLINEAGE_PORTS=15000-19999 range_pass .venv-newest >"$logs/newest" 2>&1 &
newest=$!
status=0
wait "$lowest" || status=1
wait "$newest" || status=1
cat "$logs/lowest" "$logs/newest"
rm -rf "$logs"
exit "$status"
