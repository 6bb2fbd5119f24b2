"""kraft: Kafka's KRaft replicated log in Python. The map of the code: docs/architecture.md."""

__version__ = "0.1.0"
