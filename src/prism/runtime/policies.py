"""``prism.runtime.policies``: the earlier path of ``prism.runtime.run.policies``, kept so existing imports work.

This module *is* ``prism.runtime.run.policies`` (the same module object), so every name, private ones
included, resolves and patches as before.
"""

import sys

import prism.runtime.run.policies

sys.modules[__name__] = prism.runtime.run.policies
