"""The ``deca`` command: one entry point, a subcommand per job."""

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

from deca.args import add_storage_arguments, group_size_arg, number_list, storage
from deca.errors import UsageError

DEFAULT_RUN_SCHEMES = ("bf16", "bf8", "fp8e4m3", "mxfp4", "nvfp4", "int8", "int4", "int2", "nf4", "int1", "ternary")
DEFAULT_RUN_DENSITIES = (1.0, 0.5, 0.2, 0.05)


def _codebook(text):
    path = Path(text)
    if path.suffix == ".npy":
        if not path.is_file():
            raise argparse.ArgumentTypeError(f"no such codebook file: {path}")
        return np.load(path, allow_pickle=False).ravel().tolist()
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"codebook must be comma-separated numbers or a .npy file, got {text!r}") from None


def _shape(text):
    try:
        m, k = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must look like 1024x4096, got {text!r}") from None
    return m, k


def _is_checkpoint_output(path):
    """A whole checkpoint goes to a folder; one matrix to a .deca file."""
    return path.suffix.lower() != ".deca"


def cmd_compress(args):
    if args.tensor is None and _is_checkpoint_output(args.output):
        return compress_checkpoint_cmd(args)
    for option in ("include", "exclude"):
        if getattr(args, option) is not None:
            raise UsageError(f"--{option} selects tensors of a whole checkpoint; give an output folder, not a .deca file")
    from deca.golden import compress, load_weights, save
    from deca.golden.summary import format_summary, summarize

    name, w = load_weights(args.input, args.tensor)
    cm = compress(w, args.scheme, density=args.density, group_size=args.group_size, codebook=args.codebook)
    save(cm, args.output)
    print(f"compressed {args.input} [{name}] -> {args.output}")
    print(format_summary(summarize(cm)))


def compress_checkpoint_cmd(args):
    from deca.golden.checkpoint import compress_checkpoint, format_inspection

    try:
        compress_checkpoint(args.input, args.output, args.scheme, density=args.density, group_size=args.group_size,
                            codebook=args.codebook, include=args.include, exclude=args.exclude, jobs=args.jobs)
    except KeyboardInterrupt:
        raise UsageError(f"interrupted; the finished layers are kept in {args.output}: "
                         "run the same command to resume") from None
    print(f"compressed {args.input} -> {args.output}")
    print(format_inspection(args.output))


def cmd_inspect(args):
    if args.file.is_dir():
        from deca.golden.checkpoint import format_inspection

        print(format_inspection(args.file))
        return
    from deca.golden import load
    from deca.golden.summary import format_summary, summarize

    print(format_summary(summarize(load(args.file)), name=str(args.file)))


def cmd_decompress(args):
    if args.file.is_dir():
        from deca.golden.checkpoint import decompress_checkpoint

        if args.raw:
            raise UsageError("--raw applies to one .deca file; a checkpoint decompresses with --dtype bf16|float32")
        count = decompress_checkpoint(args.file, args.output, args.dtype, engine=args.engine)
        print(f"wrote {args.output}: {count} tensors, compressed layers as {args.dtype}")
        return
    from deca.golden import decompress, load
    from deca.golden.numerics import bf16_to_f32

    cm = load(args.file)
    bits = decompress(cm, engine=args.engine)
    if args.raw:
        np.save(args.output, bits)
        print(f"wrote {args.output}: {bits.shape[0]} x {bits.shape[1]} uint16 BF16 patterns (the PE's output)")
    else:
        w = (bf16_to_f32(bits).astype(np.float64) * cm.tensor_scale).astype(np.float32)
        np.save(args.output, w)
        print(f"wrote {args.output}: {w.shape[0]} x {w.shape[1]} float32 weights")


def cmd_roundtrip(args):
    from deca.golden.summary import ROUNDTRIP_COLUMNS, format_table, roundtrip

    seed = args.seed if args.seed is not None else int(np.random.SeedSequence().entropy % 2**32)
    m, k = args.shape
    print(f"golden round trip: {m} x {k} Gaussian weights, seed {seed} (reproduce with --seed {seed})")
    w = np.random.default_rng(seed).standard_normal((m, k)).astype(np.float32)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for scheme in args.schemes:
            # ternary makes its own zeros; pruning it further is a separate choice, not a default.
            for density in ([None] if scheme == "ternary" else args.densities):
                rows.append(roundtrip(w, scheme, density, Path(tmp)))
                print(f"  {scheme:<8} density {rows[-1]['density']:.2f}: {'ok' if rows[-1]['exact'] else 'MISMATCH'}",
                      file=sys.stderr)
    print(format_table(rows, ROUNDTRIP_COLUMNS))
    bad = [r for r in rows if not r["exact"]]
    if bad:
        raise UsageError(f"{len(bad)} configurations decoded differently through the file or the memory image")
    print(f"all {len(rows)} configurations bit-exact through decompress, decompress_tile on the memory image, "
          "and save/load")


def build_parser():
    from deca.golden import SCHEMES

    p = argparse.ArgumentParser(prog="deca", description="DECA decompression PE: golden model, RTL, simulation, synthesis.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    c = sub.add_parser("compress", help="compress a weight matrix into a .deca file, or a whole checkpoint into a folder")
    c.add_argument("input", type=Path, help="a .npy, .npz or .safetensors file, a folder of .safetensors shards, "
                                            "or a .zip holding them")
    c.add_argument("-o", "--output", type=Path, required=True,
                   help="output: a .deca file (one matrix) or a folder (every selected matrix of the checkpoint)")
    c.add_argument("--scheme", required=True, choices=list(SCHEMES), metavar="SCHEME",
                   help="one of: " + ", ".join(SCHEMES))
    c.add_argument("--density", type=float, help="keep this fraction of the weights by magnitude (sparse format)")
    c.add_argument("--group-size", type=group_size_arg, help="scale group along K: 16, 32, a multiple of 32, or 'channel'")
    c.add_argument("--codebook", type=_codebook, help="codebook scheme: comma-separated values or a .npy file")
    c.add_argument("--tensor", help="one matrix: name of the tensor in a .npz or .safetensors file")
    c.add_argument("--include", metavar="REGEX", help="checkpoint: compress the 2-D float tensors whose names match "
                                                      "(default: all but embeddings)")
    c.add_argument("--exclude", metavar="REGEX", help="checkpoint: leave out the tensors whose names match")
    c.add_argument("--jobs", type=int, default=1, help="checkpoint: parallel worker processes (default 1)")
    c.set_defaults(func=cmd_compress)

    i = sub.add_parser("inspect", help="describe a .deca file, or a compressed checkpoint folder layer by layer")
    i.add_argument("file", type=Path)
    i.set_defaults(func=cmd_inspect)

    d = sub.add_parser("decompress", help="decompress a .deca file to .npy, or a checkpoint folder to .safetensors")
    d.add_argument("file", type=Path)
    d.add_argument("-o", "--output", type=Path, required=True, help="output .npy file (or .safetensors for a folder)")
    d.add_argument("--dtype", choices=["bf16", "float32"], default="bf16",
                   help="checkpoint: dtype of the decompressed layers (default bf16)")
    d.add_argument("--raw", action="store_true", help="write the uint16 BF16 patterns the PE emits instead of float32")
    d.add_argument("--engine", choices=["numpy", "baseline"], default="numpy",
                   help="numpy: the golden reference (default); baseline: the C kernels of 'deca baseline', same bits")
    d.set_defaults(func=cmd_decompress)

    r = sub.add_parser("roundtrip", help="golden round trip of every scheme: compress, memory image, file, decompress")
    r.add_argument("--shape", type=_shape, default=(512, 1024), help="weight matrix M x K (default 512x1024)")
    r.add_argument("--schemes", type=lambda t: t.split(","), default=list(DEFAULT_RUN_SCHEMES))
    r.add_argument("--densities", type=number_list(float), default=list(DEFAULT_RUN_DENSITIES))
    r.add_argument("--seed", type=int, help="random seed (default: fresh, printed)")
    r.set_defaults(func=cmd_roundtrip)

    from deca.sim.measure.cli import add_measure_parsers
    add_measure_parsers(sub)

    from deca.sim.verify.cli import add_verify_parser
    add_verify_parser(sub)

    from deca.sim.model.cli import add_model_parser
    add_model_parser(sub)

    from deca.synth.cli import add_synth_parser
    add_synth_parser(sub)

    from deca.baseline.cli import add_baseline_parser
    add_baseline_parser(sub)

    from deca.docs import add_docs_parser
    add_docs_parser(sub)

    g = sub.add_parser("generate", help="write synthesizable Verilog of the DECA PE for one (W, L)")
    g.add_argument("--W", type=int, default=32, help="elements per vOp: 8, 16, 32 or 64 (default 32)")
    g.add_argument("--L", type=int, default=8, help="big LUTs, a power of two <= W (default 8)")
    g.add_argument("--design", default="pe", metavar="NAME",
                   help="the complete PE (default) or one of its blocks alone, as built inside it (deca.hw.units; "
                        "an unknown name lists them)")
    g.add_argument("--addr-bits", type=int, default=48, help="PE: address bits (default 48)")
    g.add_argument("--id-bits", type=int, default=8, help="PE: TEPL request id bits (default 8)")
    g.add_argument("--loaders", type=int, default=2, help="PE: loaders (TEPL ports): 2 (the paper's, default), 3 or 4")
    g.add_argument("-o", "--out", type=Path, default=Path("build"), help="output folder (default build/)")
    g.add_argument("--check", action="store_true",
                   help="also lint with verilator -Wall (documented waivers) and compile with Icarus")
    g.add_argument("--arith", choices=("gates", "operators"), default="gates",
                   help="the adders and compares as the parallel-prefix gates synthesis maps (default), or as "
                        "Verilog's + and >=, which Verilator simulates about twice as fast (the fast engine's "
                        "model), each instance proven equal to its gates with Yosys")
    add_storage_arguments(g)
    g.set_defaults(func=cmd_generate)
    return p


def cmd_generate(args):
    from deca.hw.generate import generate
    from deca.toolchain import icarus_compile, verilator_lint

    path = generate(args.W, args.L, args.out, design=args.design, **storage(args), addr_bits=args.addr_bits,
                    id_bits=args.id_bits, loaders=args.loaders, arith=args.arith)
    tables = sorted(p.name for p in path.parent.glob(f"{path.stem}.*.md"))
    print(f"wrote {path} (top module {path.stem}) and {', '.join(tables)}")
    if args.arith == "operators":
        from deca.hw.arith import instances_file, read_instances
        from deca.synth.equiv import prove

        n = prove(read_instances(instances_file(path)), path.with_name(f"{path.stem}-arith-equiv"))
        print(f"{n} adder and compare instances proven equal to their gates (Yosys SAT)")
    if args.check:
        verilator_lint(path, path.stem)
        print("verilator --lint-only -Wall: clean")
        icarus_compile(path, path.stem, path.with_suffix(".vvp"))
        print("iverilog -g2005: compiled")


def main(argv=None):
    from deca.golden import FormatError
    from deca.toolchain import ToolError

    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)  # for reports that say how to reproduce them
    try:
        args.func(args)
    except (UsageError, FormatError, ValueError, OSError, ToolError) as e:
        parser.exit(2, f"deca {args.command}: error: {e}\n")
    except KeyError as e:
        parser.exit(2, f"deca {args.command}: error: {e.args[0]}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
