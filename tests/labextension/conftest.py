"""The labextension tests use the shared JupyterLab/Chromium fixtures of tests/jupyterlab_fixtures.py."""
