"""The home fixtures (tests/support/home_fixtures.py) for this folder."""

from tests.support.home_fixtures import catalog, edge, jmfts, nats_url  # noqa: F401
