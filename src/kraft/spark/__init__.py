"""spark layer; see ../shared/DESIGN.md."""
