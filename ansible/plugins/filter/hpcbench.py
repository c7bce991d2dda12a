"""Jinja filters of the hpcbench roles: `x | systemd_arg`."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError


def systemd_arg(value: object) -> str:
    """One argument of a systemd Exec*= line: double-quoted, with the
    characters systemd would otherwise interpret escaped (quotes, backslash,
    "%" specifiers, "$" variables), so that it stays one word whatever it holds.
    Newlines cannot be quoted there: refuse them (systemd.service(5),
    "Command lines")."""
    text = str(value)
    if "\n" in text or "\r" in text or "\0" in text:
        raise AnsibleFilterError(f"a systemd argument cannot hold a line break or NUL: {text!r}")
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{escaped}"'


class FilterModule:
    def filters(self) -> dict:
        return {"systemd_arg": systemd_arg}
