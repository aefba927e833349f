"""Machines for the Roof-Surface model: cores, clock, memory bandwidth, matrix-engine rate.

Presets follow the paper's simulated 56-core Sapphire Rapids (section 7). Users add their own in
a TOML file, one table per platform::

    [my-server]
    cores = 32
    frequency_ghz = 3.0
    bandwidth_gbs = 400
"""

import math
import tomllib
from dataclasses import dataclass

#: Core cycles per TMUL tile operation: one 16 x 32 BF16 tile times up to 16 activation rows (paper, 2.3).
TMUL_CYCLES = 16
#: Activation rows one TMUL operation takes; larger batches need more operations per weight tile.
TMUL_ROWS = 16


@dataclass(frozen=True)
class Platform:
    name: str
    cores: int
    freq_hz: float
    mem_bw: float  # bytes per second

    def __post_init__(self):
        if isinstance(self.cores, bool) or not isinstance(self.cores, int) or self.cores < 1:
            raise ValueError(f"platform {self.name!r}: cores must be a positive integer, got {self.cores!r}")
        for field, value in (("frequency", self.freq_hz), ("memory bandwidth", self.mem_bw)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"platform {self.name!r}: {field} must be a positive number, got {value!r}")

    @property
    def cycles_per_s(self):
        """Core cycles per second over all cores: the VOS of a one-vOp-per-cycle engine per core."""
        return self.cores * self.freq_hz

    @property
    def mos(self):
        """Matrix tile operations per second (one TMUL operation per core every 16 cycles)."""
        return self.cycles_per_s / TMUL_CYCLES

    def describe(self):
        return (f"{self.name}: {self.cores} cores x {self.freq_hz / 1e9:g} GHz, "
                f"{self.mem_bw / 1e9:g} GB/s, MOS {self.mos / 1e9:g} G tile ops/s")


PRESETS = {
    p.name: p
    for p in (
        # The paper quotes about 850 GB/s achievable HBM bandwidth; its Table 2 roofline row
        # (e.g. BF8 dense, 512 B/tile: 13.3 TFLOPS at N = 16) implies 830 GB/s, which we use.
        Platform("spr-hbm", 56, 2.5e9, 830e9),
        Platform("spr-ddr", 56, 2.5e9, 260e9),
    )
}

#: TOML key -> (Platform field, factor to SI units).
_TOML_KEYS = {"cores": ("cores", 1), "frequency_ghz": ("freq_hz", 1e9), "bandwidth_gbs": ("mem_bw", 1e9)}


def load_platforms(path):
    """Platforms defined in a TOML file (see the module docstring), by name."""
    with open(path, "rb") as f:
        try:
            doc = tomllib.load(f)
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"{path}: {e}") from None
    platforms = {}
    for name, table in doc.items():
        if not isinstance(table, dict):
            raise ValueError(f"{path}: {name!r} must be a table [{name}] with keys {', '.join(_TOML_KEYS)}")
        unknown = set(table) - set(_TOML_KEYS)
        missing = set(_TOML_KEYS) - set(table)
        if unknown or missing:
            raise ValueError(f"{path}: platform {name!r} needs exactly the keys {', '.join(_TOML_KEYS)}"
                             + (f"; unknown: {', '.join(sorted(unknown))}" if unknown else "")
                             + (f"; missing: {', '.join(sorted(missing))}" if missing else ""))
        platforms[name] = Platform(name, **{field: _scaled(table[key], factor)
                                            for key, (field, factor) in _TOML_KEYS.items()})
    return platforms


def _scaled(value, factor):
    # Non-numbers pass through unchanged so that Platform's check names the field.
    return value * factor if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def get_platform(name, path=None):
    """A preset or, when ``path`` is given, a platform of that TOML file (which may shadow a preset)."""
    known = {**PRESETS, **(load_platforms(path) if path else {})}
    try:
        return known[name]
    except KeyError:
        raise ValueError(f"unknown platform {name!r}; known platforms: {', '.join(known)}") from None
