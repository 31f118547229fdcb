"""Hardware-in-the-loop runs against a real board, a virtual one, or an emulated image."""
