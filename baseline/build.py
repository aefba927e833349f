"""Compile the C kernels with the system compiler into ``build/baseline/``, keyed by a hash of the sources.

``cc -O3 -march=native`` tunes the scalar code for the machine it runs on; the AVX-512 and AVX2
code is compiled through target attributes, so the library also builds (and falls back to the
paths the CPU has) on CPUs and compilers without them. The AVX2 path is its own translation unit
compiled with AVX-512 off, so that on an AVX-512 machine the compiler cannot slip EVEX
instructions into it. The units compile in parallel, then link. Editing a source, the flags or
the compiler gives a new hash and so a new build.
"""

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

from deca.toolchain import ToolError

CSRC = Path(__file__).with_name("csrc")
SOURCES = (CSRC / "common.h", CSRC / "decode.c", CSRC / "avx2.c", CSRC / "scalar.c")
FLAGS = ("-O3", "-march=native", "-fPIC", "-std=gnu11", "-Wall", "-Wextra", "-Werror")
#: Extra flags of a translation unit (those of avx2.c on x86 only).
UNIT_FLAGS = {"avx2.c": ("-mno-avx512f",), "scalar.c": ("-fno-tree-vectorize",)}
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
    digest.update(" ".join((*FLAGS, str(UNIT_FLAGS), _version(cc))).encode())
    return BUILD_ROOT / f"libdeca_baseline-{digest.hexdigest()[:16]}.so"


def build(force=False):
    """Compile the kernels unless the library of these sources exists; returns its path."""
    cc = compiler()
    out = library_path(cc)
    if out.exists() and not force:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the target and rename, so a concurrent loader never sees half a library.
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        tmp = Path(tmp)
        x86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")
        units = [src for src in SOURCES if src.suffix == ".c"]
        procs = [subprocess.Popen([cc, *FLAGS, *(f for f in UNIT_FLAGS.get(src.name, ()) if x86 or "avx512" not in f),
                                   "-c", str(src),
                                   "-o", str(tmp / f"{src.stem}.o")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for src in units]
        errors = [err.strip() for _, err in (p.communicate() for p in procs)]
        if any(p.returncode for p in procs):
            raise BuildError(f"compiling the software baseline with {cc} failed:\n" + "\n".join(e for e in errors if e))
        lib = tmp / "lib.so"
        proc = subprocess.run([cc, "-shared", "-o", str(lib), *(str(tmp / f"{src.stem}.o") for src in units)],
                              capture_output=True, text=True)
        if proc.returncode:
            raise BuildError(f"linking the software baseline with {cc} failed:\n{proc.stderr.strip()}")
        lib.replace(out)
    return out


def load():
    """Build if needed and load the library (ctypes)."""
    return ctypes.CDLL(str(build()))
