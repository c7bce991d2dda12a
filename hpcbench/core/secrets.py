"""Which names hold secrets: a variable, an option or an environment entry so named is
never given on a command line, written to a plan or state file, or remembered."""

from __future__ import annotations

# Secrets whatever a module declares (a fixed list, besides what Terraform reports as
# `sensitive`).
SECRET_WORDS = ("password", "passphrase", "secret", "token", "credential", "api_key", "apikey")


def looks_secret(name: str) -> bool:
    return any(word in name.lower() for word in SECRET_WORDS)
