#!/usr/bin/env bash
# Set up what is missing, then run the test suite with warnings as errors.
# Extra arguments go to pytest (e.g. -m slow, -k scale_mul, --seed 123, -n 1).
# Test files run on $DECA_TEST_JOBS processes (default 2, pytest-xdist; a file stays on one, so its
# fixtures are built once; the longest files first: tests/conftest.py); the slowest tests are listed at the end.
set -euo pipefail
source "$(dirname "$0")/bootstrap.sh"
cd "$ROOT"
PYTHONWARNINGS=error exec "$VENV/bin/python" -m pytest -n "${DECA_TEST_JOBS:-2}" --dist loadfile --no-loadscope-reorder --durations=15 "$@"
