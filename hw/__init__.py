"""Amaranth HDL generator of the DECA processing element (see the paper, section 6)."""
