"""GET /console and GET /console/{asset} — the operator console: a page and its files, checked into assets/.

No credential is needed for these files (they hold no data); the page asks the API itself for everything it shows,
with the credential the operator types in. Like /health it imports nothing but `os` (already loaded by the
interpreter): the files are read once, at init, and answered from memory.

Every answer carries the same strict headers: a Content-Security-Policy that lets the page load its own files
only (no inline script or style, no other origin, no framing, no form submission), nosniff, no referrer.
"""

import os

_ASSETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "assets")
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; object-src 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    # Small files, answered whole: always asked again, so a deploy is seen at the next load.
    "Cache-Control": "no-cache",
}
_NOT_FOUND = '{"error":{"code":"not_found","message":"the console has no such file"}}'


def _load() -> dict[str, tuple[str, str]]:
    files: dict[str, tuple[str, str]] = {}
    for name in os.listdir(_ASSETS):
        content_type = _TYPES.get(os.path.splitext(name)[1])
        if content_type is not None:
            with open(os.path.join(_ASSETS, name), encoding="utf-8") as handle:
                files[name] = (content_type, handle.read())
    return files


FILES = _load()
# The page's own settings: the API's AUTH_MODE decides which credential the login form asks for (in `iam` mode
# a browser has none to give, and the page says so).
_MODE = os.environ.get("AUTH_MODE", "secret")
FILES["config.json"] = (
    "application/json",
    '{"auth_mode":"%s"}' % (_MODE if _MODE in ("secret", "token", "iam") else "secret"),
)


def _answer(status: int, content_type: str, body: str, extra: dict[str, str] | None = None) -> dict[str, object]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": content_type, **SECURITY_HEADERS, **(extra or {})},
        "body": body,
    }


def lambda_handler(event: dict[str, object], context: object) -> dict[str, object]:
    """The page at /console/ (/console redirects there, so that its files' relative addresses resolve), a file by
    name at /console/{asset}; any other name is 404."""
    parameters = event.get("pathParameters") or {}
    asset = parameters.get("asset") if isinstance(parameters, dict) else None
    if asset is None:
        if not str(event.get("rawPath", "")).endswith("/"):
            # Relative, so that a custom domain's base path is kept.
            return _answer(302, "text/plain; charset=utf-8", "", {"Location": "console/"})
        asset = "index.html"
    found = FILES.get(str(asset))
    if found is None:
        return _answer(404, "application/json", _NOT_FOUND)
    return _answer(200, found[0], found[1])
