"""Yosys/nextpnr synthesis flow: area and timing per (W, L)."""
