"""Safe targets: where a deployed stack may send a delivery. Only `https` to a name (or address) whose every
address is public: loopback, private, link-local (the instance metadata address, 169.254.169.254, is one),
carrier-grade NAT, multicast, reserved and unspecified addresses are refused, and so is the metadata service's
IPv6 address (fd00:ec2::254, a private one). `make run` (WEBHOOK_ALLOW_LOOPBACK) also takes loopback addresses,
over `http` too, for local receivers.

The check runs when a webhook is created and again before every attempt, because a name may resolve otherwise
later: the attempt then connects to the very address the check passed (`Target.address`), never resolving the
name a second time, so a name that answers once public and once private cannot slip through (DNS rebinding).
A URL with credentials in it is refused too (they would be sent to whoever the name leads to).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from typing import NamedTuple
from urllib.parse import urlsplit

Resolve = Callable[[str, int], Sequence[str]]
"""A name and port → its addresses (`resolve`: the system's resolver)."""


class TargetRefused(ValueError):
    """The URL is no safe target: why, in words for its owner."""


class Target(NamedTuple):
    """Where one attempt goes: the URL's parts and the one address it connects to."""

    scheme: str
    host: str  # as the URL names it (the Host header, and TLS's server name)
    port: int
    path: str  # with its query
    address: str  # checked: the attempt connects here and nowhere else


def resolve(host: str, port: int) -> list[str]:
    """Every address the system's resolver gives `host` (TargetRefused when it gives none)."""
    try:
        answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        raise TargetRefused(f"the host {host} does not resolve") from error
    return list(dict.fromkeys(str(answer[4][0]) for answer in answers))


def _ip(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    return ip


def refusal(address: str, allow_loopback: bool) -> str | None:
    """What kind of address `address` is when a delivery may not go to it (None: it may)."""
    ip = _ip(address)
    if ip.is_loopback:
        return None if allow_loopback else "a loopback address"
    if ip.is_link_local:
        return "a link-local address (the instance metadata service is one)"
    if ip.is_multicast or ip.is_reserved or ip.is_unspecified or str(ip).startswith("0."):
        return "not a public address"
    if ip.is_private or ip in ipaddress.ip_network("100.64.0.0/10"):
        return "a private address"
    if not ip.is_global:
        return "not a public address"
    return None


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return _ip(host)
    except ValueError:
        return None


def check(url: str, allow_loopback: bool, resolver: Resolve = resolve) -> Target:
    """The target of `url` if it is safe now; TargetRefused naming why not."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise TargetRefused(f"the URL is malformed: {error}") from error
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http") or (scheme == "http" and not allow_loopback):
        raise TargetRefused("the URL must be https" + (" (or http to a loopback address)" if allow_loopback else ""))
    if parts.username is not None or parts.password is not None:
        raise TargetRefused("the URL must not carry credentials")
    if parts.fragment:
        raise TargetRefused("the URL must not have a fragment")
    host = parts.hostname
    if not host:
        raise TargetRefused("the URL names no host")
    port = port or (443 if scheme == "https" else 80)
    addresses = list(resolver(host, port))
    if not addresses:
        raise TargetRefused(f"the host {host} does not resolve")
    for address in addresses:
        kind = refusal(address, allow_loopback)
        if kind is not None:
            named = host if _ip(address) == _literal(host) else f"{host}, which resolves to {address},"
            raise TargetRefused(f"{named} is {kind}")
    if scheme == "http" and not all(_ip(address).is_loopback for address in addresses):
        raise TargetRefused("the URL must be https (http only to a loopback address)")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(scheme, host, port, path, addresses[0])
