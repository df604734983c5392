"""The AIP 0.1 surface: the publisher declaration (aip.json) and the retrieve endpoint."""
