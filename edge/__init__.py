"""The board runtime: microphone, endpointing, Vosk ASR, Piper TTS, echo gate, notices.

``edge run`` starts a loopback nats-server and the edge nodes on it; see
:mod:`edge.runtime` for the component list and where the bridge plugs in.
"""
