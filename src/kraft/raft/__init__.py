"""raft layer; see ../shared/DESIGN.md."""
