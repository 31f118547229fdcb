"""Effectors: the nodes that carry out an agent's verbs and acknowledge them.

``effector.journal_append`` and ``effector.jmfts_write`` subscribe
``events.workspace.*.out.<verb>``, write into JMFTS over HTTP under the
publishing agent's own principal (its bearer token, read from the token
directory ``home up`` provisions), and ack on the verb's ack subject with
``ok: true`` and the document id, or ``ok: false`` and an ``error``.

Errors, under :class:`shared.errors.TetherError` (umbrella in parentheses)::

    EffectorError
    └── CredentialError   (ConfigurationError) no usable token for the agent that published
                          the verb

JMFTS's own refusals and outages arrive as :class:`home.jmfts.errors.JmftsError` (from
the one client, :mod:`home.jmfts.client`) and are acked as failures like these.
"""
