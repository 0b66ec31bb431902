"""prism: an asyncio agent runtime whose turn control is a replaceable loop strategy."""
