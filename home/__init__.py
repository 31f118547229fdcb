"""The home side: substrate, agent nodes, τ extensions, the JMFTS memory server, the LLM server."""
