"""``prism.runtime.state``: the earlier path of ``prism.runtime.run.state``, kept so existing imports work.

This module *is* ``prism.runtime.run.state`` (the same module object), so every name, private ones
included, resolves and patches as before.
"""

import sys

import prism.runtime.run.state

sys.modules[__name__] = prism.runtime.run.state
