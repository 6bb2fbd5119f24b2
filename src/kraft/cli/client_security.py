"""The tools' `--command-config` security is kraft's clients' own (`kraft.client.security`):
one reader of Kafka's client settings for the consumer, the Spark sources and the tools.
This name stays for the tools that import it."""

from kraft.client.security import ClientConfigError, client_security

__all__ = ["ClientConfigError", "client_security"]
