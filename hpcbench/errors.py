"""Errors the user can fix. The CLI prints them as one line and exits with status 2."""


class UsageError(Exception):
    """Bad input or a missing prerequisite: the message names what to fix."""

    exit_code = 2
