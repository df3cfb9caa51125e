"""What never reaches a store, a tag or the console: secrets in configs, tags, URIs and error messages. Its own
module: the metric logger (which tracking imports) redacts its warnings too."""

from __future__ import annotations

import re

# A config field or tag whose name ends in one of these words (`hf_token`, `api_key`, `db_password`; not
# `pad_token_id`) holds a secret; its value is never logged. `pwd`: ODBC's (Driver={...};Server=x;Uid=u;Pwd=...)
SECRET_PARTS = ("token", "password", "passwd", "pwd", "secret", "key", "apikey", "credential", "credentials")
REDACTED = "***"
# scheme://user[:password]@host; a password may hold '/' and '@' unencoded (SQLAlchemy, MLflow's database stores,
# reads postgresql://u:s3cr/et@db as password "s3cr/et"): with a ':', the credentials run to the URI's last '@'
# (so `http://host:5000/u@x.csv` loses its host and path: a password of digits and '/' must not leak); an IPv6
# host's '[' is no user's character
_URI_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][\w+.-]*://)(?:(?P<password>[^/@\s:'\"\[]+:\S*)|[^/@\s'\"\[]+)@")
# Azure's (adlfs's) URLs put the container where a user goes (abfs://container@account.dfs.core.windows.net/path): no
# secret, and redacted, a registered task names data promotion cannot read; there only a `:password` is removed
AZURE_SCHEMES = ("abfs", "abfss", "wasb", "wasbs", "az")
# a URL's query parameter that carries a secret (a presigned S3 / GCS URL's signature and session token, an Azure
# SAS's sig, ?token= / ?api_key=), or a connection string's (Azure's ";AccountKey=...", ODBC's ";Pwd=..." or, braced,
# ";Pwd={a;b}"), also percent-encoded in a URL (SQLAlchemy's ?odbc_connect=DRIVER%3D...%3BPWD%3D...): there a value
# ends at an encoded ';' too. A parameter that is no secret is searched inside (odbc_connect's value holds PWD's).
_QUERY_PARAM = re.compile(r"(?P<lead>(?:^|[?&;]|(?i:%3B))(?P<name>[\w.\-]+)(?:=|(?P<encoded>(?i:%3D))))"
                          r"(?P<value>\{(?:[^}]|\}\})*\}|(?(encoded)(?:(?!(?i:%3B))[^&;#\s'\"])+|[^&;#\s'\"]+))")
QUERY_SECRETS = ("signature", "sig")
_MAX_NESTING = 8  # parameters inside a parameter's value: odbc_connect=...%3BPWD%3D... is 1


def is_secret_name(name: str, parts: tuple[str, ...] = SECRET_PARTS) -> bool:
    """Whether `name`'s last word is one of `parts`: words split at '_', '-' and a camelCase hump (AccountKey). A
    metric's name (`split/name`: `eval.dev/f1_PASSWORD`, the F1 of an entity type a PII tagger finds) is none."""
    last = name.rsplit(".", 1)[-1]
    if "/" in last:
        return False
    last = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", last)
    return re.split(r"[_\-]", last.lower())[-1] in parts


def _without_userinfo(m: re.Match) -> str:
    """A `_URI_USERINFO` match with its user and password gone; an Azure URL's bare container name kept."""
    if m["scheme"][:-3].lower() in AZURE_SCHEMES and not m["password"]:
        return m[0]
    return f"{m['scheme']}{REDACTED}@"


def redact(value, name: str = ""):
    """`value` (a config dict, a tag dict or one value named `name`, or a message) safe to log: the values of
    secret-looking names (SECRET_PARTS) become REDACTED, and credentials inside URIs (`https://user:pass@host`, and
    query parameters of such names or a signature's: `?X-Amz-Signature=...`) are removed."""
    if isinstance(value, dict):
        return {k: redact(v, f"{name}.{k}" if name else str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact(v, name) for v in value)
    if name and is_secret_name(name) and value not in ("", None):
        return REDACTED
    if isinstance(value, str):
        value = _URI_USERINFO.sub(_without_userinfo, value)
        return _params(value) if "=" in value or "%3d" in value.lower() else value
    return value


def _params(text: str) -> str:
    """`text` with the values of its secret parameters (SECRET_PARTS, QUERY_SECRETS) redacted; another's value is
    searched too, as a text of its own (odbc_connect's holds PWD's). A loop over a list of values, not recursion: a
    message of `k=k=k=...` nests one value per link (Python's recursion limit crashed the job's real error away);
    past _MAX_NESTING levels a value is redacted whole, never let through unsearched."""
    secret = SECRET_PARTS + QUERY_SECRETS
    spans, todo = [], [(0, len(text), 0)]  # redacted (start, end); values still to search: (start, end, depth)
    while todo:
        start, end, depth = todo.pop()
        for m in _QUERY_PARAM.finditer(text[start:end]):
            at = (start + m.start("value"), start + m.end("value"))
            if is_secret_name(m["name"], secret) or depth == _MAX_NESTING:
                spans.append(at)
            else:
                todo.append((*at, depth + 1))
    out, last = [], 0
    for start, end in sorted(spans):  # disjoint: a value is searched only when it is not redacted
        out += [text[last:start], REDACTED]
        last = end
    return "".join(out) + text[last:]
