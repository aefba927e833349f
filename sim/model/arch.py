"""Decoder-only transformer architectures for ``deca model llm``: their FC weight matrices and the
attention sizes, from a preset, a Hugging Face ``config.json`` or a folder written by ``deca compress``.

Every FC layer is a weight matrix of ``rows`` outputs by ``cols`` inputs, one per decoder layer
(``count`` of them), that each generated token multiplies once; an expert of a mixture of experts
is one of ``experts`` such matrices per layer of which each token uses ``active``. Kinds name them across model families: attn.q, attn.k, attn.v, attn.o, mlp.gate, mlp.up,
mlp.down, mlp.router, lm_head, and fc for what fits none (e.g. BERT's pooler).
"""

import fnmatch
import re
from dataclasses import dataclass, replace
from pathlib import Path

from deca.errors import UsageError, read_json


@dataclass(frozen=True)
class FC:
    name: str
    kind: str
    rows: int
    cols: int
    count: int = 1
    experts: int = 1
    active: int = 1
    #: Compression: a golden scheme, its density (None: dense) and, from a checkpoint folder, the
    #: measured bytes per weight tile and the folder's group size and codebook.
    scheme: str = "bf16"
    density: float | None = None
    bytes_per_tile: float | None = None
    group_size: int | str | None = None
    codebook: tuple | None = None


@dataclass(frozen=True)
class Arch:
    name: str
    source: str
    layers: int
    hidden: int
    inter: int
    vocab: int
    q_dim: int  # attention heads x head size
    kv_dim: int  # KV heads x head size: a cached token's K (and V) width
    gated: bool
    tied: bool
    fcs: tuple

    @property
    def weights(self):
        """FC weights one generated token multiplies (the LM head once even when tied to the embedding)."""
        return sum(f.rows * f.cols * f.count * f.active for f in self.fcs)


#: Presets in Hugging Face config.json terms (the published configs of these models).
_LLAMA2_7B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000,
              "tie_word_embeddings": False, "hidden_act": "silu"}
_MISTRAL_7B = {**_LLAMA2_7B, "model_type": "mistral", "intermediate_size": 14336, "num_key_value_heads": 8}
PRESETS = {
    "llama2-70b": {**_LLAMA2_7B, "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
                   "num_attention_heads": 64, "num_key_value_heads": 8},
    "llama2-7b": _LLAMA2_7B,
    "llama3-8b": {**_MISTRAL_7B, "model_type": "llama", "vocab_size": 128256},
    "mistral-7b": _MISTRAL_7B,
    "mixtral-8x7b": {**_MISTRAL_7B, "model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2},
    "opt-66b": {"model_type": "opt", "hidden_size": 9216, "ffn_dim": 36864, "num_hidden_layers": 64,
                "num_attention_heads": 72, "vocab_size": 50272, "tie_word_embeddings": True, "activation_function": "relu"},
}

#: config.json field -> accepted spellings (first found wins) and what it is, for the error message.
_FIELDS = {
    "hidden": (("hidden_size", "n_embd", "d_model"), "the model width"),
    "inter": (("intermediate_size", "ffn_dim", "n_inner"), "the MLP's hidden size"),
    "layers": (("num_hidden_layers", "n_layer", "num_layers"), "the number of decoder layers"),
    "heads": (("num_attention_heads", "n_head"), "the number of attention heads"),
    "vocab": (("vocab_size",), "the vocabulary size"),
}
#: Families whose MLP is gated (SwiGLU: gate and up projections, then down).
GATED_TYPES = {"llama", "mistral", "mixtral", "qwen2", "qwen3", "gemma", "gemma2", "phi3", "olmo2"}


def _positive(path, key, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{path}: {key!r} must be a positive integer, got {value!r}")
    return value


def from_config(cfg, name, source="config.json"):
    """The architecture of a Hugging Face config (a dict): see the module text for what it reads."""
    if not isinstance(cfg, dict):
        raise UsageError(f"{source}: not a JSON object")
    got = {}
    for field, (keys, what) in _FIELDS.items():
        key = next((k for k in keys if cfg.get(k) is not None), None)
        if field == "inter" and key is None and "n_inner" in cfg:  # GPT-2: null means 4 x the width
            got[field] = 4 * got["hidden"]
            continue
        if key is None:
            raise UsageError(f"{source}: missing {keys[0]!r} ({what})")
        got[field] = _positive(source, key, cfg[key])
    kv_heads = _positive(source, "num_key_value_heads", cfg.get("num_key_value_heads", got["heads"]))
    head_dim = _positive(source, "head_dim", cfg.get("head_dim") or got["hidden"] // got["heads"])
    if got["heads"] % kv_heads:
        raise UsageError(f"{source}: {got['heads']} attention heads are not a multiple of {kv_heads} KV heads")
    act = cfg.get("hidden_act", cfg.get("activation_function", ""))
    gated = bool(cfg.get("gated_mlp", cfg.get("model_type") in GATED_TYPES or act in ("silu", "swiglu")))
    experts = _positive(source, "num_local_experts", cfg.get("num_local_experts", 1))
    active = _positive(source, "num_experts_per_tok", cfg.get("num_experts_per_tok", 1))
    if active > experts:
        raise UsageError(f"{source}: {active} experts per token of {experts}")
    tied = bool(cfg.get("tie_word_embeddings", False))
    h, i, n = got["hidden"], got["inter"], got["layers"]
    q_dim, kv_dim = got["heads"] * head_dim, kv_heads * head_dim
    fcs = [FC("attn.q", "attn.q", q_dim, h, n), FC("attn.k", "attn.k", kv_dim, h, n),
           FC("attn.v", "attn.v", kv_dim, h, n), FC("attn.o", "attn.o", h, q_dim, n)]
    if experts > 1:
        fcs.append(FC("mlp.router", "mlp.router", experts, h, n))
    mlp = [("mlp.gate", i, h)] if gated else []
    fcs += [FC(kind, kind, rows, cols, n, experts, active) for kind, rows, cols in
            [*mlp, ("mlp.up", i, h), ("mlp.down", h, i)]]
    fcs.append(FC("lm_head", "lm_head", got["vocab"], h, 1))
    return Arch(name, source, n, h, i, got["vocab"], q_dim, kv_dim, gated, tied, tuple(fcs))


def load_config(path):
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    cfg = read_json(path, f"no config file {path}")
    return from_config(cfg, cfg.get("_name_or_path") or path.parent.name or path.stem, str(path))


def preset(name):
    try:
        return from_config(PRESETS[name], name, f"preset {name}")
    except KeyError:
        raise UsageError(f"unknown model preset {name!r}; known presets: {', '.join(PRESETS)}") from None


# Kinds of layer names across families (BERT, GPT-2/OPT, Llama/Mistral, Mixtral).
_KINDS = (
    ("attn.q", r"q_proj|\.query\b|\bwq\b"), ("attn.k", r"k_proj|\.key\b|\bwk\b"),
    ("attn.v", r"v_proj|\.value\b|\bwv\b"), ("attn.o", r"o_proj|out_proj|attention\.output\.dense|\bwo\b"),
    ("mlp.router", r"block_sparse_moe\.gate\b|router"), ("mlp.gate", r"gate_proj|\.w1\b"),
    ("mlp.up", r"up_proj|fc1|intermediate\.dense|\.w3\b"), ("mlp.down", r"down_proj|fc2|output\.dense|\.w2\b"),
    ("lm_head", r"lm_head|embed_out"),
)
_LAYER_INDEX = re.compile(r"(?:layers?|h|blocks?)\.(\d+)\.")


def kind_of(name):
    return next((kind for kind, pattern in _KINDS if re.search(pattern, name)), "fc")


def from_checkpoint(folder):
    """The architecture of a folder written by ``deca compress``: one FC per compressed matrix (its
    real shape, scheme, density and bytes), the BF16 matrices it left out, attention widths from
    the K/V/Q projections, the LM head from an untied head or the token embedding."""
    from deca.golden.checkpoint import layer_rows

    manifest, rows, missing = layer_rows(folder)
    if missing:
        raise UsageError(f"{folder}: {len(missing)} layers are not finished (first: {missing[0]}); "
                         "finish the deca compress run first")
    s = manifest["settings"]
    fcs = []
    for r in rows:
        out_dim, in_dim = r["shape"]
        fcs.append(FC(r["name"], kind_of(r["name"]), out_dim, in_dim, scheme=r["scheme"],
                      density=None if s["density"] is None and r["scheme"] != "ternary" else r["density"],
                      bytes_per_tile=r["total_bytes"] / (-(-out_dim // 16) * -(-in_dim // 32)),
                      group_size=s["group_size"], codebook=None if s["codebook"] is None else tuple(s["codebook"])))
    compressed = {f.name for f in fcs}
    shapes = {t["name"]: t["shape"] for t in manifest["tensors"]}
    for name in manifest["left_out"]:
        if len(shapes[name]) == 2 and kind_of(name) != "fc" and name not in compressed:
            fcs.append(FC(name, kind_of(name), *shapes[name]))
    if not any(f.kind == "lm_head" for f in fcs):
        embed = next((n for n in shapes if re.search(r"(embed_tokens|word_embeddings|wte)\.weight$", n)), None)
        if embed is not None:
            fcs.append(FC(f"lm_head (tied to {embed})", "lm_head", *shapes[embed]))  # BF16, as left out
    widths = {kind: [f.rows for f in fcs if f.kind == kind] for kind in ("attn.q", "attn.k")}
    if not widths["attn.q"] or not widths["attn.k"]:
        raise UsageError(f"{folder}: no attention Q/K projection among its layers; the model needs them "
                         "for the KV cache")
    layers = len({m.group(1) for f in fcs if (m := _LAYER_INDEX.search(f.name))}) or len(widths["attn.q"])
    hidden = max(f.cols for f in fcs if f.kind == "attn.q")
    up = [f.rows for f in fcs if f.kind == "mlp.up"]
    head = [f.rows for f in fcs if f.kind == "lm_head"]
    source = Path(manifest["source"])
    name = source.parent.name if source.stem in ("model", "pytorch_model") else source.stem
    return Arch(name, str(folder), layers, hidden, max(up) if up else 0, head[0] if head else 0,
                widths["attn.q"][0], widths["attn.k"][0], any(f.kind == "mlp.gate" for f in fcs),
                any(f.name.startswith("lm_head (tied") for f in fcs), tuple(fcs))


# Schemes ------------------------------------------------------------------------------------------

#: The paper's names for its schemes (section 7).
ALIASES = {"q16": "bf16", "q8": "bf8", "q4": "mxfp4"}
#: What a scheme given without a pattern applies to: the decoder layers' FC matrices (the LM head
#: stays BF16 unless a pattern names it, as in the paper's Table 6).
DEFAULT_PATTERN = ("attn.*", "mlp.*", "fc")


def parse_scheme(text):
    """(patterns, scheme, density) of "q4", "q8@0.3", "int4@0.5" or "PATTERN=SPEC"."""
    from deca.golden import SCHEMES

    pattern, sep, spec = text.rpartition("=")
    name, at, density = spec.partition("@")
    scheme = ALIASES.get(name.lower(), name.lower())
    if scheme not in SCHEMES:
        raise UsageError(f"--scheme {text!r}: unknown scheme {name!r}; known: {', '.join([*ALIASES, *SCHEMES])}")
    d = None
    if at:
        try:
            d = float(density)
        except ValueError:
            raise UsageError(f"--scheme {text!r}: density {density!r} is not a number") from None
        if not 0 < d <= 1:
            raise UsageError(f"--scheme {text!r}: density must be in (0, 1], got {d:g}")
    return ((pattern,) if sep else DEFAULT_PATTERN), scheme, d


def apply_schemes(arch, specs):
    """``arch`` with the schemes of ``specs`` (texts for ``parse_scheme``, later ones win) assigned to
    the FC layers whose kind or name they match; a pattern matching no layer is an error."""
    fcs = list(arch.fcs)
    for text in specs:
        patterns, scheme, density = parse_scheme(text)
        hit = [i for i, f in enumerate(fcs) if any(fnmatch.fnmatchcase(f.kind, p) or fnmatch.fnmatchcase(f.name, p)
                                                    for p in patterns)]
        if not hit:
            raise UsageError(f"--scheme {text!r}: pattern {' '.join(patterns)} matches no layer of {arch.name} "
                             f"(kinds: {', '.join(sorted({f.kind for f in fcs}))})")
        for i in hit:
            fcs[i] = replace(fcs[i], scheme=scheme, density=density, bytes_per_tile=None)
    return replace(arch, fcs=tuple(fcs))


def scheme_label(scheme, density):
    inverse = {v: k.upper() for k, v in ALIASES.items()}
    base = inverse.get(scheme, scheme)
    return base if density is None or density == 1 else f"{base} {100 * density:.3g}%"
