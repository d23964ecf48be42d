"""Decision rules written once (DESIGN.md "One rule, one place"): plain functions over numbers and arrays that a
policy calls and its compiled kernel compiles (``njit(inline="always")(rule)`` in :mod:`shepherd.core.engine.fast`)
— never a hand copy in the kernel. They import nothing of the engine or numba, so a reference run loads neither.
One module per policy family; each function's docstring cites the paper section it implements.
"""
