"""metadata layer; see ../shared/DESIGN.md."""
