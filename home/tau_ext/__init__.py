"""τ extension files, handed to τ by path (``--extension home/tau_ext/NAME.py``).

They execute inside τ's interpreter, import the wire contract from :mod:`shared`
rather than re-declaring it, and publish everything the agent does as events.

Errors raised here::

    ExtensionError
    ├── BindingFileError   the node's per-run binding file is missing or malformed
    └── AckError           an ack never came, or came saying the effector failed
"""
