"""``prism.runtime.plan``: the earlier path of ``prism.runtime.run.plan``, kept so existing imports work.

This module *is* ``prism.runtime.run.plan`` (the same module object), so every name, private ones
included, resolves and patches as before.
"""

import sys

import prism.runtime.run.plan

sys.modules[__name__] = prism.runtime.run.plan
