"""``prism.runtime.config``: the earlier path of ``prism.runtime.run.config``, kept so existing imports work.

This module *is* ``prism.runtime.run.config`` (the same module object), so every name, private ones
included, resolves and patches as before.
"""

import sys

import prism.runtime.run.config

sys.modules[__name__] = prism.runtime.run.config
