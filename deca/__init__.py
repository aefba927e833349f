"""DECA: near-core LLM weight-decompression PE (golden model, RTL generator, simulation, synthesis)."""
