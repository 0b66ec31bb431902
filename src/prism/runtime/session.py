"""``prism.runtime.session``: the earlier path of ``prism.runtime.run.session``, kept so existing imports work.

This module *is* ``prism.runtime.run.session`` (the same module object), so every name, private ones
included, resolves and patches as before.
"""

import sys

import prism.runtime.run.session

sys.modules[__name__] = prism.runtime.run.session
