"""The software engine as measured on this machine (``deca baseline``, ``deca.baseline``), for the
Roof-Surface model: the platform file's format and reader live here, its writer in ``deca.baseline``.

``deca baseline`` writes core cycles per tile of each (scheme, density) to its platform file. The
model's software engine needs VO_tile in core cycles of one core for any kernel: the measured L2
median (the decode cost with the data in cache; the model charges memory separately) of the
kernel's scheme class, linearly interpolated in density between measured densities and held
constant beyond them. Dense BF16 needs no decompression (0 cycles), as in the paper-derived engine.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deca.errors import read_json

from .engines import scheme_class

#: Where ``deca baseline`` writes its platform file, and the file's format tag.
DEFAULT_OUT = Path("out/baseline")
PLATFORM_FILE = "platform.json"
FORMAT = "deca-baseline-platform/1"
DEFAULT_PLATFORM_FILE = DEFAULT_OUT / PLATFORM_FILE


@dataclass(frozen=True)
class MeasuredSoftwareEngine:
    """``points``: scheme class -> ((density, cycles), ...) in increasing density."""

    points: dict
    machine: str
    path: str
    source: str
    name: str = "software (measured)"

    def measures(self, kernel):
        """Whether the file holds a cost for the kernel's scheme class."""
        return scheme_class(kernel) in self.points or scheme_class(kernel) == "bf16"

    def vo_tile(self, kernel):
        key = scheme_class(kernel)
        if key == "bf16":
            return 0.0
        if key not in self.points:
            raise ValueError(f"{self.source} has no measured software cost for {key!r}; measure it with "
                             f"'deca baseline --workloads {kernel.scheme}:{kernel.density:g}'")
        densities, cycles = zip(*self.points[key])
        return float(np.interp(kernel.density, densities, cycles))

    def describe(self):
        return f"{self.machine}, {self.path} path ({self.source})"


def measured_engine(path):
    """The engine of a platform file written by ``deca baseline``."""
    doc = load_platform(path)
    points = {}
    for w in doc["workloads"]:
        points.setdefault(w["class"], []).append((float(w["density"]), float(w["l2_cycles_per_tile"]["median"])))
    points = {key: tuple(sorted(v)) for key, v in points.items()}
    return MeasuredSoftwareEngine(points, doc["machine"]["cpu"], doc["path"], str(path))


def default_engine():
    """The engine of ``out/baseline/platform.json`` when ``deca baseline`` has written it, else None."""
    return measured_engine(DEFAULT_PLATFORM_FILE) if Path(DEFAULT_PLATFORM_FILE).is_file() else None


def chosen_engine(choice):
    """The engine a ``--baseline`` option names: None for "none", the given file's, or by default
    ``default_engine()``."""
    if choice == "none":
        return None
    return measured_engine(choice) if choice else default_engine()


def load_platform(path):
    """A platform file written by ``deca baseline``; ValueError naming the problem otherwise."""
    path = Path(path)
    doc = read_json(path, f"no software-baseline platform file {path}: run 'deca baseline' first",
                    "a deca baseline platform file", ValueError)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"{path}: not a deca baseline platform file (format {FORMAT!r} expected)")
    try:
        for w in doc["workloads"]:
            float(w["l2_cycles_per_tile"]["median"]), str(w["scheme"]), float(w["density"]), bool(w["sparse"])
        float(doc["core_ghz"])
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path}: malformed baseline platform file ({e!r} missing or wrong)") from None
    return doc
