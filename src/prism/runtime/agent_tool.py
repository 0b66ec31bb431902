"""``prism.runtime.agent_tool``: the earlier path of ``prism.runtime.agents.agent_tool``, kept so existing imports work.

This module *is* ``prism.runtime.agents.agent_tool`` (the same module object), so every name, private ones
included, resolves and patches as before.
"""

import sys

import prism.runtime.agents.agent_tool

sys.modules[__name__] = prism.runtime.agents.agent_tool
