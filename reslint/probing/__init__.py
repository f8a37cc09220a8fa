"""The probe: one real forward and backward pass, gradient statistics per parameter and block, RL601-RL604.

`reslint.probe(model, inputs, ...)` (reslint.probing.api) is the Python entry point and
`reslint probe FILE --model EXPR` (reslint.probing.command) the command. Importing this package
imports nothing heavy: torch is imported by the modules that measure, when they run.
"""

DEFAULT_TIMEOUT = 600.0  # seconds for importing, building and measuring: a large model on a CPU, not a hang
