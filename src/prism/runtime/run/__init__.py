"""The run path: one run from options to result (the runtime's first room; see docs/architecture.md).

It never imports the other two rooms, ``prism.runtime.durable`` and ``prism.runtime.agents``.
"""
