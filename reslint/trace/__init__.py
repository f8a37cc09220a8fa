"""The trace engine: import a checked file, build its models on the meta device, capture FX graphs.

Nothing here is imported by `reslint` itself at import time, and nothing here runs under
`--static`. Entry point: `reslint.trace.engine.trace_file`.
"""
