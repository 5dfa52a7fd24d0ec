"""Safe targets (`scheduler/webhooks/targets.py`): https to public addresses only, loopback (and http to it) in
`make run`; every address a name resolves to checked, and the one checked the one connected to."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from scheduler.webhooks.targets import Target, TargetRefused, check

PUBLIC = "93.184.215.14"


def resolving(*addresses: str) -> object:
    def resolve(host: str, port: int) -> Sequence[str]:
        return addresses

    return resolve


def refused(url: str, *addresses: str, loopback: bool = False) -> str:
    with pytest.raises(TargetRefused) as caught:
        check(url, loopback, resolving(*addresses))  # type: ignore[arg-type]
    return str(caught.value)


def test_an_https_url_whose_name_resolves_to_public_addresses_is_a_target() -> None:
    both = resolving(PUBLIC, "2606:2800:21f:cb07:6820:80da:af6b:8b2c")
    target = check("https://hooks.example.com/in?x=1", False, both)  # type: ignore[arg-type]

    assert target == Target("https", "hooks.example.com", 443, "/in?x=1", PUBLIC)


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.9", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "private"),
        ("fc00::1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("fd00:ec2::254", "private"),
        ("0.0.0.0", "not a public address"),  # noqa: S104 - an address to refuse, nothing binds
        ("224.0.0.1", "not a public address"),
        ("240.0.0.1", "not a public address"),
    ],
)
def test_a_name_resolving_to_a_non_public_address_is_refused_naming_why(address: str, kind: str) -> None:
    assert kind in refused("https://hooks.example.com/", address)


def test_one_private_address_among_public_ones_is_enough_to_refuse() -> None:
    assert "10.0.0.7" in refused("https://hooks.example.com/", PUBLIC, "10.0.0.7")


def test_the_metadata_address_written_as_the_host_is_refused() -> None:
    why = refused("https://169.254.169.254/latest/meta-data/", "169.254.169.254")

    assert why.startswith("169.254.169.254 is a link-local")


def test_plain_http_is_refused_when_deployed() -> None:
    assert "must be https" in refused("http://hooks.example.com/", PUBLIC)


def test_credentials_in_the_url_are_refused() -> None:
    assert "credentials" in refused("https://user:pw@hooks.example.com/", PUBLIC)


def test_a_name_that_does_not_resolve_is_refused() -> None:
    assert "does not resolve" in refused("https://nowhere.example.com/")


def test_a_name_whose_answer_changes_is_checked_again_and_refused() -> None:
    answers = iter([[PUBLIC], ["127.0.0.1"]])

    def rebinding(host: str, port: int) -> Sequence[str]:
        return next(answers)

    first = check("https://rebind.example.com/", False, rebinding)

    with pytest.raises(TargetRefused, match=r"resolves to 127\.0\.0\.1"):
        check("https://rebind.example.com/", False, rebinding)
    assert first.address == PUBLIC


def test_the_target_is_the_address_checked_not_the_name() -> None:
    target = check("https://hooks.example.com:8443/", False, resolving(PUBLIC))  # type: ignore[arg-type]

    assert (target.address, target.port, target.host) == (PUBLIC, 8443, "hooks.example.com")


def test_make_run_takes_loopback_over_http() -> None:
    target = check("http://127.0.0.1:9000/hook", True, resolving("127.0.0.1"))  # type: ignore[arg-type]

    assert (target.scheme, target.address, target.port, target.path) == ("http", "127.0.0.1", 9000, "/hook")


def test_make_run_still_refuses_private_addresses() -> None:
    assert "private" in refused("https://hooks.example.com/", "10.0.0.7", loopback=True)


def test_make_run_takes_http_only_to_loopback() -> None:
    assert "http only to a loopback address" in refused("http://hooks.example.com/", PUBLIC, loopback=True)
