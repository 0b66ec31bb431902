"""``prism.runtime.turn_policy``: the earlier path of ``prism.runtime.run.turn_policy``, kept so existing imports work.

This module *is* ``prism.runtime.run.turn_policy`` (the same module object), so every name, private ones
included, resolves and patches as before.
"""

import sys

import prism.runtime.run.turn_policy

sys.modules[__name__] = prism.runtime.run.turn_policy
