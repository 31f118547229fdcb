"""The board runtime: audio I/O, ASR, TTS, echo gate, push-to-talk/VAD, and the keyboard TUI."""
