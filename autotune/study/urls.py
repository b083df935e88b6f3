"""Storage URLs as they may be shown: the default one under a results folder, and every secret a
URL can carry (a password, a password-like query parameter) hidden wherever it is printed."""
from __future__ import annotations

import os
import re

DEFAULT_RESULTS = "autotune-results"


def default_storage(results_dir: str = DEFAULT_RESULTS) -> str:
    return f"sqlite:///{os.path.join(results_dir, 'autotune.db')}"


# Query parameters that carry a secret (libpq's password and sslpassword, SQLCipher's key).
_SECRET_PARAMS = ("password", "passwd", "pwd", "passphrase", "sslpassword", "key")


def redact(url: str) -> str:
    """Storage URL fit to print, as SQLAlchemy itself renders it with the password hidden (a
    password may hold '/', '?' or '#', which no regex over the text can delimit), with secret
    query parameters hidden too. A URL SQLAlchemy cannot parse is masked whole but its scheme."""
    parsed = _parsed(url)
    if parsed is None or "@" in (parsed.host or ""):   # '@' left in the host: part of a password
        scheme = re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", url)
        return (scheme.group(0) if scheme else "") + "***"
    query = {k: ("***" if k.lower() in _SECRET_PARAMS else v) for k, v in parsed.query.items()}
    # the rendering quotes the query's '*'; shown as typed
    return parsed.set(query=query).render_as_string(hide_password=True).replace("%2A", "*")


def holds_password(url: str) -> bool:
    """Whether the URL itself carries a password (in argv, every local user can read it)."""
    parsed = _parsed(url)
    return parsed is not None and bool(parsed.password or any(
        k.lower() in _SECRET_PARAMS for k in parsed.query))


def redact_message(text: str, url: str) -> str:
    """A driver's message about `url`, with the URL's secrets (as typed and as decoded) hidden:
    the message is not a URL, so it cannot be rendered, only searched."""
    parsed = _parsed(url)
    secrets = {url} if parsed is None else {parsed.password or "", *(
        str(v) for k, v in parsed.query.items() if k.lower() in _SECRET_PARAMS)}
    if parsed is not None and parsed.password:
        from urllib.parse import quote
        secrets.add(quote(parsed.password, safe=""))
    for secret in sorted(filter(None, secrets), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text.replace(url, redact(url))


def _parsed(url: str):
    from sqlalchemy.engine import make_url
    try:
        return make_url(url)
    except Exception:  # ArgumentError, or a ValueError from a port that is not a number
        return None
