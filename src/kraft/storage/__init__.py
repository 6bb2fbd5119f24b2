"""storage layer; see ../shared/DESIGN.md."""
