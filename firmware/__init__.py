"""The board image: build, flash and verify; the board's own files (systemd units, first boot)."""
