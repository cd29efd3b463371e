"""Agents: tools over knowledge bases and tables, model providers, the run loop."""
