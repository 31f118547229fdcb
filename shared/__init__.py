"""tether's wire contract: the envelope, the subjects, and the YAML schema models.

Standard library, PyYAML and nats-py only; nothing else of ours is imported here.
"""
