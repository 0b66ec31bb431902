"""Agents: an agent's configuration, building one, and agents called as tools (the runtime's third
room; see docs/architecture.md).
"""
