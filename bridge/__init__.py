"""The bridge: two halves carrying text subjects over an SSH tunnel, and their offline checker."""
