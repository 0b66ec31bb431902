"""``prism.runtime.stream``: the earlier path of ``prism.runtime.run.stream``, kept so existing imports work.

This module *is* ``prism.runtime.run.stream`` (the same module object), so every name, private ones
included, resolves and patches as before.
"""

import sys

import prism.runtime.run.stream

sys.modules[__name__] = prism.runtime.run.stream
