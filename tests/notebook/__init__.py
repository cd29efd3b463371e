"""Tests of the magics and notebooks (executed with nbclient)."""
