"""``prism.runtime.context``: the earlier path of ``prism.runtime.run.context``, kept so existing imports work.

This module *is* ``prism.runtime.run.context`` (the same module object), so every name, private ones
included, resolves and patches as before.
"""

import sys

import prism.runtime.run.context

sys.modules[__name__] = prism.runtime.run.context
