"""Files that go onto the board: systemd units, first boot, network and SSH settings."""
