"""kraft: Kafka's KRaft replicated log in Python."""

__version__ = "0.1.0"
