"""τ extension files, handed to τ by path (``--extension home/tau_extensions/NAME.py``).

They execute inside τ's interpreter, import the wire contract from :mod:`shared`
rather than re-declaring it, and publish everything the agent does as events.

Their exceptions are drawn in :mod:`home.tau_extensions.errors`.
"""
