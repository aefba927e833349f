"""Simulation and performance: ``model`` (the analytic Roof-Surface model), ``bench`` (the RTL
testbench) and ``measure`` (measurement campaigns on the RTL), each depending only on the ones before."""
