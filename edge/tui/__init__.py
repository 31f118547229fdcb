"""``edge tui`` and ``edge say``: a keyboard and a screen standing in for the board.

Typed lines leave as ``events.sensation.<device>.turn`` exactly as the board's ASR
would send them; speak events come back and are shown (then acknowledged with
``speech.completed`` as the board's speaker would), so home cannot tell the TUI
from the board. Modules:

- :mod:`edge.tui.wire`: the typed messages (pure, no I/O);
- :mod:`edge.tui.link`: the ``bridge.status`` payload the status bar reads (pure);
- :mod:`edge.tui.conversation`: turns, answers and notes by ``binding_id`` (pure);
- :mod:`edge.tui.session`: the one NATS connection both commands use (I/O);
- :mod:`edge.tui.transport`: where that NATS is: ``--direct`` or the edge's own
  loopback nats-server with the bridge node beside it;
- :mod:`edge.tui.app`: the Textual app; :mod:`edge.tui.say`: one scripted turn;
- :mod:`edge.tui.cli`: the ``tui`` and ``say`` commands of the ``edge`` CLI.
"""
