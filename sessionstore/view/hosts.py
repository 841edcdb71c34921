"""Which addresses and `Host` headers are loopback, for `view`'s warning and its Host check.

`view` bound to loopback answers only a `Host` naming loopback (DNS
rebinding, docs/viewer.md "Safety"), and warns before it binds anything else.
"""

from __future__ import annotations

import ipaddress
from email.message import Message
from urllib.parse import urlsplit


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback name or address (`localhost`, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        # `::ffff:127.0.0.1` binds loopback alone, yet Python before 3.13 calls it no
        # loopback: the Host check was off (DNS rebinding read the store).
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def is_loopback_host(header: str, own: str = "localhost") -> bool:
    """Whether a `Host` header names loopback: `localhost`, a name below `.localhost`
    (RFC 6761), a loopback address, or `own` (how `--host` spelled the loopback address
    bound: `127.1`, a host name), with or without a port."""
    try:
        name = urlsplit(f"//{header}").hostname or ""
    except ValueError:  # `[`, `[::1`: no name at all (it was an error outside any answer)
        return False
    return name in ("localhost", own.lower()) or name.endswith(".localhost") or is_loopback(name)


def single_host(headers: Message) -> str | None:
    """The request's one `Host` header, None if it has none.

    ValueError for two (which one would the Host check read?) or for a line
    that is no header (`Host : evil.example`, whitespace before the colon): the
    standard library takes it and every line after it for a body, so such a
    `Host` was not checked at all. RFC 9112 answers both 400.
    """
    if headers.defects or headers.get_payload():
        raise ValueError("a header line is not 'name: value'")
    found = headers.get_all("Host") or []
    if len(found) > 1:
        raise ValueError("more than one Host header")
    return found[0] if found else None
