"""Reminders and timers: durable, exact, spoken by home first (docs/architecture.md
"Reminders").

- ``book.py``     the REMINDERS JetStream stream, one scheduled message per reminder,
                  and reading them back: pending, cancelled, due
- ``when.py``     when a spoken request means ("in ten minutes", "at half past five")
                  and what it asks to be reminded of
- ``cli.py``      ``home reminders list`` and ``home reminders cancel``
"""
