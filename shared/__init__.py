"""tether's wire contract: the envelope, the subjects, and the YAML schema models.

Standard library and PyYAML only; nothing else of ours is imported here.
"""
