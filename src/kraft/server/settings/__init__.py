"""settings room of the server layer; see docs/architecture.md."""
