"""Random numbers (issue 3): being written."""
