"""``prism.runtime.options``: the earlier path of ``prism.runtime.run.options``, kept so existing imports work.

This module *is* ``prism.runtime.run.options`` (the same module object), so every name, private ones
included, resolves and patches as before.
"""

import sys

import prism.runtime.run.options

sys.modules[__name__] = prism.runtime.run.options
