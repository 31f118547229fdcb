"""Benchmarks: `make bench` runs them all, `make bench NAME=x` runs tests/bench/x.py."""
