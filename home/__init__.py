"""``home``: the home side of tether (substrate, agents, JMFTS memory, LLM server)."""
