"""GET /console/ and its files (functions/console): what every answer carries, and what the checked-in page may not
hold: inline script or style, markup parsed from strings, anything from another origin."""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from .conftest import event

ASSETS = Path(__file__).resolve().parents[3] / "functions" / "console" / "assets"
SCRIPTS = sorted(ASSETS.glob("*.js"))


@pytest.fixture
def console(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The handler as loaded with the environment's AUTH_MODE; `console(mode)` loads it again with another."""
    module = importlib.import_module("functions.console.app")

    def load(mode: str) -> ModuleType:
        monkeypatch.setenv("AUTH_MODE", mode)
        return importlib.reload(module)

    yield load
    monkeypatch.delenv("AUTH_MODE", raising=False)
    importlib.reload(module)


def get(app: ModuleType, path: str) -> dict[str, Any]:
    asset = path.removeprefix("/console").removeprefix("/")
    sample = event("console", rawPath=path)
    if asset:
        sample["pathParameters"] = {"asset": asset}
    return dict(app.lambda_handler(sample, None))


@pytest.mark.parametrize(
    "path", ["/console/", "/console", "/console/main.js", "/console/config.json", "/console/no-such-file.js"]
)
def test_every_console_answer_carries_the_strict_headers(console: Any, path: str) -> None:
    headers = get(console("token"), path)["headers"]

    policy = [part.strip() for part in headers["Content-Security-Policy"].split(";")]
    assert policy[0] == "default-src 'self'" and "frame-ancestors 'none'" in policy
    assert not [part for part in policy if "unsafe-" in part or "*" in part or "data:" in part]
    assert (headers["X-Content-Type-Options"], headers["Referrer-Policy"]) == ("nosniff", "no-referrer")


def test_the_page_is_served_at_the_final_slash_and_each_file_by_name(console: Any) -> None:
    app = console("token")
    page, script = get(app, "/console/"), get(app, "/console/main.js")

    assert (page["statusCode"], page["headers"]["Content-Type"]) == (200, "text/html; charset=utf-8")
    assert page["body"] == (ASSETS / "index.html").read_text()
    assert (script["statusCode"], script["headers"]["Content-Type"]) == (200, "text/javascript; charset=utf-8")


def test_the_console_without_its_final_slash_redirects_relatively(console: Any) -> None:
    answer = get(console("token"), "/console")
    assert (answer["statusCode"], answer["headers"]["Location"]) == (302, "console/")


def test_a_file_the_console_lacks_is_404(console: Any) -> None:
    assert get(console("token"), "/console/secrets.txt")["statusCode"] == 404


@pytest.mark.parametrize("mode", ["secret", "token", "iam"])
def test_the_page_learns_the_api_s_auth_mode_from_config_json(console: Any, mode: str) -> None:
    answer = get(console(mode), "/console/config.json")
    assert (answer["statusCode"], answer["body"]) == (200, f'{{"auth_mode":"{mode}"}}')


class _Markup(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.script_text = ""
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.script_text += data.strip()


def test_the_page_has_no_inline_script_or_style() -> None:
    markup = _Markup()
    markup.feed((ASSETS / "index.html").read_text())

    scripts = [attrs for tag, attrs in markup.tags if tag == "script"]
    assert scripts == [{"type": "module", "src": "main.js"}] and markup.script_text == ""
    assert [tag for tag, _ in markup.tags if tag == "style"] == []
    inline = [(tag, name) for tag, attrs in markup.tags for name in attrs if name == "style" or name.startswith("on")]
    assert inline == []


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_no_script_parses_markup_from_a_string(script: Path) -> None:
    """Values reach the page through textContent and setAttribute only (dom.js): nothing turns a string into
    markup or code, so an owner_id or correlation_id holding markup cannot run."""
    source = script.read_text()
    parsers = r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|DOMParser"
    assert re.findall(parsers, source) == []


@pytest.mark.parametrize("asset", sorted(ASSETS.iterdir()), ids=lambda path: path.name)
def test_no_file_names_another_origin(asset: Path) -> None:
    """Everything the page loads or asks for is its own or the API's, addressed relatively; the one absolute
    address is SVG's namespace, a name that is never fetched."""
    addresses = re.findall(r"(?:https?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}[^\s\"')]*", asset.read_text())
    assert [found for found in addresses if found != "http://www.w3.org/2000/svg"] == []
