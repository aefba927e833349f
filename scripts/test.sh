#!/usr/bin/env bash
# Set up what is missing, then run the test suite with warnings as errors.
# Extra arguments go to pytest (e.g. -m slow, -k scale_mul, --seed 123).
set -euo pipefail
source "$(dirname "$0")/bootstrap.sh"
cd "$ROOT"
PYTHONWARNINGS=error exec "$VENV/bin/python" -m pytest "$@"
