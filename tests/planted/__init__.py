"""Planted-bug drop-ins: the upstream flash kernel with one line changed.

Each module exposes `flash_attention` with the upstream signature, so the harness
tests it with `--kernel tests.planted.<module>:flash_attention`. The harness must
catch every one of them.
"""
