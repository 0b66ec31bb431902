"""``prism.runtime.attempts``: the earlier path of ``prism.runtime.run.attempts``, kept so existing imports work.

This module *is* ``prism.runtime.run.attempts`` (the same module object), so every name, private ones
included, resolves and patches as before.
"""

import sys

import prism.runtime.run.attempts

sys.modules[__name__] = prism.runtime.run.attempts
