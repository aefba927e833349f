"""``deca verify``: the constrained-random regression of the PE, its coverage and its mutants."""
