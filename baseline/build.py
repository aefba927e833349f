"""Compile the C kernels with the system compiler into ``build/baseline/``, keyed by a hash of the sources.

``cc -O3 -march=native`` tunes the scalar code for the machine it runs on; the AVX-512 code is
compiled through target attributes, so the library also builds (and falls back to the scalar
path) on CPUs and compilers without AVX-512. Editing a source, the flags or the compiler gives a
new hash and so a new build.
"""

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from deca.toolchain import ToolError

SOURCES = (Path(__file__).with_name("csrc") / "decode.c",)
FLAGS = ("-O3", "-march=native", "-shared", "-fPIC", "-std=gnu11", "-Wall", "-Wextra", "-Werror")
BUILD_ROOT = Path(__file__).resolve().parent.parent / "build" / "baseline"


class BuildError(ToolError):
    """The kernels cannot be built (no compiler, or it failed); the message says what to do."""


def compiler():
    """The C compiler: $CC, else cc, gcc or clang on PATH."""
    for name in ([os.environ["CC"]] if os.environ.get("CC") else ["cc", "gcc", "clang"]):
        path = shutil.which(name)
        if path:
            return path
    raise BuildError("no C compiler found (tried $CC, cc, gcc, clang): install one, e.g. 'sudo apt-get install gcc'")


def _version(cc):
    try:
        return subprocess.run([cc, "--version"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    except (OSError, subprocess.CalledProcessError, IndexError) as e:
        raise BuildError(f"C compiler {cc} does not run ({e}): install a working one, e.g. 'sudo apt-get install gcc'") from None


def library_path(cc=None):
    """Where the library of the current sources, flags and compiler lives (built or not)."""
    cc = cc or compiler()
    digest = hashlib.sha256()
    for src in SOURCES:
        digest.update(src.read_bytes())
    digest.update(" ".join((*FLAGS, _version(cc))).encode())
    return BUILD_ROOT / f"libdeca_baseline-{digest.hexdigest()[:16]}.so"


def build(force=False):
    """Compile the kernels unless the library of these sources exists; returns its path."""
    cc = compiler()
    out = library_path(cc)
    if out.exists() and not force:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the target and rename, so a concurrent loader never sees half a library.
    with tempfile.NamedTemporaryFile(dir=out.parent, suffix=".so", delete=False) as tmp:
        tmp_path = Path(tmp.name)
    try:
        proc = subprocess.run([cc, *FLAGS, "-o", str(tmp_path), *map(str, SOURCES)], capture_output=True, text=True)
        if proc.returncode:
            raise BuildError(f"compiling the software baseline with {cc} failed:\n{proc.stderr.strip()}")
        tmp_path.replace(out)
    finally:
        tmp_path.unlink(missing_ok=True)
    return out


def load():
    """Build if needed and load the library (ctypes)."""
    return ctypes.CDLL(str(build()))
