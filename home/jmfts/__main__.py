"""``python -m home.jmfts serve ...``: the same as ``home jmfts ...``."""

from home.jmfts.cli import jmfts_app

jmfts_app()
