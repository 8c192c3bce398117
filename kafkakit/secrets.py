"""Passwords out of anything the toolkit prints or stores: error messages, status files, JSON errors.

The endpoints carry credentials the only way their clients take them (a URL's `user:password@`, a
libpq DSN's `password=`), and the messages that name an endpoint ("Connect at http://u:p@host does not
answer") would print them to stderr, into `--json` errors and into a job's `status.json`. `masked`
replaces every password it recognises with `***`, keeping the user and the host (what a reader needs to
fix a wrong address). Pure; applied where text leaves the process.
"""

from __future__ import annotations

import re

MASK = "***"
# scheme://user:password@host — the password runs to the last '@' before the host (an unescaped '@'
# in a password is taken by libpq and some clients: it is masked whole too)
_URL_PASSWORD = re.compile(
    r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*:)(?P<secret>[^\s/]*)(?=@[^\s@/]*(?:[/\s?#)\]'\",]|$))"
)
# libpq key=value DSNs and similar settings: password=..., password='...'
_KEY_VALUE = re.compile(r"(?P<head>\b(?:password|passwd|pwd)\s*=\s*)(?P<secret>'(?:[^'\\]|\\.)*'|\S+)", re.I)


def masked(text: str) -> str:
    """`text` with every URL password and `password=` value replaced by ***."""
    text = _URL_PASSWORD.sub(lambda m: m["head"] + MASK, text)
    return _KEY_VALUE.sub(lambda m: m["head"] + MASK, text)
