"""Who may talk to a node: TLS contexts from Kafka's ssl.* settings, and the SASL mechanisms
(PLAIN, SCRAM-SHA-256/512) on both ends of a connection.

Pure logic on the standard library: no sockets, no config files, no metadata image. The
protocol server runs the exchanges (kraft.protocol.sasl_gate), the server layer says where
settings and credentials come from (kraft.server.settings.listener_security). docs/architecture.md,
"Security in brief", is the map; docs/decisions/0034-security-as-kafkas.md the details.
"""
