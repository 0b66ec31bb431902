"""``prism.runtime.checkpoints``: the earlier path of ``prism.checkpoints``, kept so existing imports work.

This module *is* ``prism.checkpoints`` (the same module object), so every name, private ones
included, resolves and patches as before.
"""

import sys

import prism.checkpoints

sys.modules[__name__] = prism.checkpoints
