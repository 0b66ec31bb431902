"""``prism.runtime.agent``: the earlier path of ``prism.runtime.agents.agent``, kept so existing imports work.

This module *is* ``prism.runtime.agents.agent`` (the same module object), so every name, private ones
included, resolves and patches as before.
"""

import sys

import prism.runtime.agents.agent

sys.modules[__name__] = prism.runtime.agents.agent
