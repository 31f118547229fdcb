"""The intent step: whether a turn is conversation or one of the verbs a person can say.

:mod:`home.intent.step` decides, before any model, on the MiniLM embedding and the
turn's words; :mod:`home.intent.cli` is ``home intent judge``. Errors:
:class:`home.intent.errors.IntentError`. See docs/architecture.md, "The intent step".
"""
