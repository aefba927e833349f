#!/usr/bin/env bash
# Set up everything (virtualenv, Python packages, Icarus Verilog) and run the main job on its
# built-in defaults. Extra arguments go to `deca run`.
set -euo pipefail
source "$(dirname "$0")/bootstrap.sh"
say "ready; activate with: source .venv/bin/activate"
exec "$VENV/bin/deca" run "$@"
