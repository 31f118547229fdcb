"""Home: substrate, agents, JMFTS, LLM server (built by other issues)."""
