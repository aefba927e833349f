"""Bad input to the compressor gets an exception that names the problem."""

import numpy as np
import pytest

from deca.golden import SCHEMES, compress
from deca.golden.schemes import get_scheme


@pytest.fixture
def w(rng):
    return rng.standard_normal((20, 70)).astype(np.float32)


def test_unknown_scheme(w):
    with pytest.raises(ValueError, match="unknown scheme 'fp3'; known schemes: bf16, bf8"):
        compress(w, "fp3")


@pytest.mark.parametrize("density", [-0.1, 1.5, float("nan"), "0.5", True])
def test_density_outside_unit_interval(w, density):
    with pytest.raises(ValueError, match="density must be a number in \\[0, 1\\]"):
        compress(w, "bf8", density=density)


@pytest.mark.parametrize("scheme, group_size, message", [
    ("int4", 48, "group size 48 is not allowed for K=70"),
    ("int4", 96, "group size 96 is not allowed for K=70"),
    ("int4", 0, "group size 0 is not allowed"),
    ("int4", -32, "group size -32 is not allowed"),
    ("int4", 2.5, "group size must be an integer or 'channel'"),
    ("mxfp4", 16, "'mxfp4' uses groups of 32 elements"),
    ("nvfp4", 32, "'nvfp4' uses groups of 16 elements"),
    ("bf8", 32, "'bf8' has no scales"),
    ("bf16", "channel", "'bf16' has no scales"),
])
def test_group_size_not_allowed(w, scheme, group_size, message):
    with pytest.raises(ValueError, match=message):
        compress(w, scheme, group_size=group_size)


@pytest.mark.parametrize("scheme", list(SCHEMES))
@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf])
def test_nan_inf_weights(w, scheme, special):
    w[3, 5] = special
    kwargs = {"codebook": [-1.0, 0.0, 1.0]} if scheme == "codebook" else {}
    sch = get_scheme(scheme)
    if (sch.encodes_nan if np.isnan(special) else sch.encodes_inf):
        compress(w, scheme, **kwargs)  # representable: must compress (values checked in test_schemes)
    else:
        kind = "NaN" if np.isnan(special) else "Inf"
        with pytest.raises(ValueError, match=f"weights contain {kind}, which scheme '{scheme}' cannot encode"):
            compress(w, scheme, **kwargs)


def test_pruned_special_weights_are_accepted(w):
    w[0, 0] = np.nan  # the smallest-magnitude rule keeps NaN, so prune with an explicit mask instead
    mask = np.ones(w.shape, bool)
    mask[0, 0] = False
    compress(w, "int4", mask=mask)


@pytest.mark.parametrize("kwargs, message", [
    ({"scheme": "codebook"}, "needs a codebook"),
    ({"scheme": "int4", "codebook": [0.0, 1.0]}, "'int4' takes no codebook"),
    ({"scheme": "codebook", "codebook": list(range(257))}, "1..256 values"),
    ({"scheme": "codebook", "codebook": []}, "1..256 values"),
    ({"scheme": "codebook", "codebook": [0.0, 1.0, np.inf]}, "must be finite"),
    ({"scheme": "codebook", "codebook": [1.0, 1.001]}, "distinct after rounding to BF16"),
    ({"scheme": "codebook", "codebook": [0.0], "group_size": 32}, "needs a nonzero value"),
])
def test_bad_codebook(w, kwargs, message):
    with pytest.raises(ValueError, match=message):
        compress(w, **kwargs)


@pytest.mark.parametrize("bad, message", [
    (np.zeros(5, np.float32), "2-D matrix"),
    (np.zeros((2, 3, 4), np.float32), "2-D matrix"),
    (np.zeros((0, 4), np.float32), "non-empty"),
    (np.zeros((4, 4), complex), "real numbers"),
    (np.array([["a", "b"]]), "real numbers"),
])
def test_bad_weight_arrays(bad, message):
    with pytest.raises(ValueError, match=message):
        compress(bad, "bf8")


def test_bad_masks(w):
    with pytest.raises(ValueError, match="mask shape \\(20, 7\\) does not match weights shape \\(20, 70\\)"):
        compress(w, "bf8", mask=np.ones((20, 7), bool))
    with pytest.raises(ValueError, match="boolean"):
        compress(w, "bf8", mask=np.full(w.shape, 2))
    with pytest.raises(ValueError, match="either a density or a mask"):
        compress(w, "bf8", mask=np.ones(w.shape, bool), density=0.5)


def test_scale_overflow_is_reported():
    w = np.full((16, 32), np.finfo(np.float32).max, np.float32)
    with pytest.raises(ValueError, match="overflows BF16"):
        compress(w, "int1")
