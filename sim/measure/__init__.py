"""Measurement campaigns on the RTL (``deca run``, ``deca sweep``): points, records, reports, plots."""
