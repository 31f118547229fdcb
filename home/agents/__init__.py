"""Agent nodes: one persistent ``tau --mode rpc`` process behind each node.

The node subscribes its inbound rail, feeds τ one prompt per event, waits for
the matching ``agent_end``, and supervises the process. Everything the agent
does leaves sideways, as events the extension files in :mod:`home.tau_extensions`
publish.
"""
