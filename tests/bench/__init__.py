"""Benchmarks: ``make bench NAME=x`` runs ``tests.bench.x.main()`` (never part of make test)."""
