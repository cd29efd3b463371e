"""The package version, in a leaf module so that any part (the engine's status answer
included) can read it without importing the root package and, through it, the client."""

__version__ = "0.1.0"
