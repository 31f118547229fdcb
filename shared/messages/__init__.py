"""Every message on the bus as a type: one frozen dataclass per message, one module per rail.

- :mod:`shared.messages.voice`: turn, partial, speak, reply, speech completed;
- :mod:`shared.messages.bridge`: a bridge half's link status;
- :mod:`shared.messages.memory`: the memory reflex's recall and memorize reports;
- :mod:`shared.messages.verbs`: verb requests and their acks;
- :mod:`shared.messages.history`: a device's conversation, asked of its agent on
  home's NATS (request and reply, not events).

Producers and consumers alike build and read payloads only through these types;
each travels in the one envelope of :mod:`shared.event`, and a malformed field is
an ``EnvelopeError`` naming it (readers in :mod:`shared.messages.fields`).
"""
