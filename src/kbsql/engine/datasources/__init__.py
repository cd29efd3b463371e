"""Data sources: external databases and files attached as tables."""
