"""CLI subcommands: one module each, found by harness.cli.

A module defines NAME, HELP, add_arguments(parser) and main(args) -> int.
"""
