"""``prism.runtime.leg``: the earlier path of ``prism.runtime.run.leg``, kept so existing imports work.

This module *is* ``prism.runtime.run.leg`` (the same module object), so every name, private ones
included, resolves and patches as before.
"""

import sys

import prism.runtime.run.leg

sys.modules[__name__] = prism.runtime.run.leg
