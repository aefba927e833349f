"""Core/memory model that drives the PE, and the Roof-Surface performance model."""
