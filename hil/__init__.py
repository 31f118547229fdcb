"""Hardware-in-the-loop harness (built by another issue)."""
