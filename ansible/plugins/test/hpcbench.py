"""Jinja tests of the hpcbench roles: `x is image_reference`, `x is ip_address`."""

from __future__ import annotations

import ipaddress
import re

# The grammar of distribution/reference (docker/distribution reference.go),
# IPv6 registry hosts left out: name [":" tag] ["@" digest]. A value that
# matches cannot start with "-", holds no space, quote, "$" or "%", so it
# can be neither a docker option nor a shell or systemd expansion.
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_REFERENCE = re.compile(rf"(?P<name>{_NAME})(?::{_TAG})?(?:@{_DIGEST})?", re.ASCII)
NAME_MAX = 255  # reference.go: NameTotalLengthMax


def image_reference(value: object) -> bool:
    """True for a container image reference such as registry:5000/org/img:tag@sha256:..."""
    if not isinstance(value, str):
        return False
    m = IMAGE_REFERENCE.fullmatch(value)
    return m is not None and len(m["name"]) <= NAME_MAX


def ip_address(value: object) -> bool:
    """True for one IPv4 or IPv6 address written plainly: no prefix, no host
    name, no IPv6 zone ("%eth0")."""
    if not isinstance(value, str) or "%" in value:
        return False
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


class TestModule:
    def tests(self) -> dict:
        return {"image_reference": image_reference, "ip_address": ip_address}
