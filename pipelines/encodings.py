"""Text encodings a user names for their files (task and prediction files' `columns.encoding`, a corpus'
`data.text_encoding`): one canonical name for each, and the reject reason of a record holding a byte it does not
define. Imports nothing heavy: configs check the name before any work."""

from __future__ import annotations

import codecs


def check_encoding(name: str) -> str:
    """A text encoding's canonical name ("" for "" and for UTF-8, with or without its byte-order mark, which the
    readers skip); ValueError naming it where Python has no such codec or it is not a text encoding (base64, zlib)."""
    if not name:
        return ""
    try:
        "a".encode(name)  # LookupError for a name Python does not know, and for base64, zlib: not text encodings
    except (LookupError, UnicodeError):  # UnicodeError: the "undefined" codec
        raise ValueError(f"{name!r} is not a text encoding Python knows (its names: utf-8, cp1252, latin-1, utf-16, "
                         "shift_jis, gb18030, ...)") from None
    canonical = codecs.lookup(name).name
    return "" if canonical in ("utf-8", "utf-8-sig") else canonical


def invalid_reason(encoding: str = "") -> str:
    """The reject reason of a record the readers find invalid_utf8, in a file of `encoding`: a byte it does not
    define (cp1252's 0x81) makes it invalid_cp1252 (and so does a JSON escape of half a surrogate pair there)."""
    name = check_encoding(encoding)
    return f"invalid_{name.replace('-', '_')}" if name else "invalid_utf8"
