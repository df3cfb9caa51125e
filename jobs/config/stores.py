"""The MLflow tracking store a job names: its default, the stores MLflow 3 takes, the local path a store or artifact
URI names, and a SQLite store refused before any cluster work where it cannot serve (a folder, a file that is no
database; one that does not exist, where the job only reads from it). Written without MLflow: a config check imports
no framework. jobs/config/sections.py's TrackingConfig applies them.
"""

from __future__ import annotations

import os
import re
import urllib.parse
import urllib.request
from pathlib import Path

from bert_core.config import ConfigError
from jobs.registry.redaction import redact

DEFAULT_STORE = "sqlite:///mlflow.db"  # the embedded store, ./mlflow.db: one machine's
SQLITE_HEADER = b"SQLite format 3\x00"  # a database's first 16 bytes (an empty file, which SQLite fills, has none)


def default_tracking_uri() -> str:
    """tracking.tracking_uri where neither a config file nor an override sets it: MLFLOW_TRACKING_URI, as MLflow's own
    commands (mlflow ui, mlflow models serve) read it, else DEFAULT_STORE. Read where the config is made, the driver:
    in a submitted job (ray job submit) that is the job's environment (the cluster's and its runtime env's env_vars),
    not the submitting shell's; workers get the URI in their config. (mlflow.set_tracking_uri sets it too, in this
    process and those it starts: the store the job already writes to.)"""
    return os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_STORE


def from_environment(uri: str) -> str:
    """A note for an error about tracking URI `uri` where it is MLFLOW_TRACKING_URI's: the user may have set no URI."""
    return " (MLFLOW_TRACKING_URI's: the default where no config sets it)" \
        if uri and uri == os.environ.get("MLFLOW_TRACKING_URI") else ""


# the stores an MLflow 3 tracking URI names (a database's scheme may name its driver: postgresql+psycopg2://)
BARE_STORES = ("databricks", "databricks-uc", "uc")  # stores named by their scheme alone, no path
TRACKING_SCHEMES = ("http", "https", "sqlite", "postgresql", "mysql", "mssql", *BARE_STORES)


def keeps_artifacts(uri: str) -> bool:
    """Whether the store keeps its experiments' artifacts itself (a tracking server, Databricks): no local folder
    beside it is written."""
    return uri.startswith(("http://", "https://", "databricks://", "databricks-uc://", "uc://")) or uri in BARE_STORES


def check_store_uri(uri: str, name: str = "tracking.tracking_uri") -> None:
    """Refuse, before any cluster work, a tracking URI no MLflow 3 store takes: a folder or file: (its file store is
    refused unless MLFLOW_ALLOW_FILE_STORE=true), a mistyped scheme (sqllite:///, SQLITE:///: schemes are read as
    written), a sqlite URI without its three slashes (sqlite:mlflow.db). A scheme a plugin registers (the
    mlflow.tracking_store entry points) is taken. `name`: the field or flag that gave it."""
    from importlib.metadata import entry_points

    scheme = uri.split("://", 1)[0] if "://" in uri else uri if uri in BARE_STORES else ""
    plugins = {ep.name for ep in entry_points(group="mlflow.tracking_store")}
    files = os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() in ("true", "1") and scheme in ("", "file")
    known = scheme.split("+", 1)[0] in TRACKING_SCHEMES and (scheme != "sqlite" or uri.startswith("sqlite:///"))
    said = f"{name}={redact(uri)!r}{from_environment(uri)}"
    if scheme.startswith("sqlite+"):  # SQLAlchemy's driver form: MLflow opens it, but the guards of a local store
        # (a relative file in a submitted job's copy, one file written from several machines) read sqlite:///
        raise ConfigError(f"{said}: write a SQLite store as sqlite:///<file> (MLflow picks the driver), not "
                          f"{scheme}://")
    if not (known or files or scheme in plugins) or uri != uri.strip():
        raise ConfigError(f"{said} names no MLflow store; allowed: a server's "
                          "http(s)://host:port, sqlite:///<file> (sqlite:////<absolute path>), a database "
                          "(postgresql://, mysql://, mssql://) or databricks (MLflow 3 refuses folder and file: "
                          "stores unless MLFLOW_ALLOW_FILE_STORE=true)")


def local_path(value: str) -> str | None:
    """The local path a store or artifact location names, as MLflow reads it: a path as given, sqlite:///<path> (its
    query dropped), and a file: URI in each form MLflow takes (file:///abs, file://localhost/abs, its own file:/abs,
    file:rel; mlflow.utils.file_utils.local_file_uri_to_path: the URI's path, %-escapes undone). None for storage
    that is no local path (s3://, gs://, http://, mlflow-artifacts:/, ...)."""
    if value.startswith("sqlite:///"):
        return value[len("sqlite:///"):].split("?", 1)[0]
    if value.startswith("file:"):
        return urllib.request.url2pathname(urllib.parse.urlsplit(value).path)
    # a scheme's one-slash form is no path either: a tracking server's mlflow-artifacts:/1 (every experiment's
    # artifact location on `mlflow server`), dbfs:/, hdfs:/; nor is a store named by its scheme alone (databricks)
    return None if _SCHEME.match(value) or value in BARE_STORES else value


_SCHEME = re.compile(r"[A-Za-z][\w+.-]*:/")


def check_sqlite_file(uri: str) -> None:
    """A sqlite:/// store's file, where it exists, must be a SQLite database this user may write (an empty file is
    one SQLite fills in): a folder (sqlite:///, sqlite:///configs) or another file (sqlite:///README.md) failed in
    MLflow's first call, after the cluster came up, the corpus was prepared and MLflow had retried for minutes."""
    if not uri.startswith("sqlite:///"):
        return
    path, said = Path(local_path(uri) or "."), f"tracking.tracking_uri={redact(uri)!r}{from_environment(uri)}"
    if path.is_dir():
        raise ConfigError(f"{said} names the folder {str(path.resolve())!r}, not a database file; allowed: "
                          f"sqlite:///<file> (a new file, or an MLflow SQLite store)")
    if not path.exists():
        return  # MLflow makes it (and the folders above it): sections' check_experiment checks the folder takes it
    try:
        with path.open("rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as e:
        raise ConfigError(f"{said}: its file {str(path)!r} cannot be read ({e.strerror or e})") from None
    if head and head != SQLITE_HEADER:
        raise ConfigError(f"{said} names {str(path)!r}, which is no SQLite database (its first bytes are not "
                          "'SQLite format 3'); allowed: a new file, or an MLflow SQLite store")
    if not os.access(path, os.W_OK):
        raise ConfigError(f"{said}: its file {str(path)!r} is read-only for this user")


def absent_store(uri: str) -> Path | None:
    """The file a sqlite:/// store names, where it does not exist (None for it and any other store): MLflow makes an
    empty database on opening one, which holds nothing to read."""
    path = local_path(uri) if uri.startswith("sqlite:///") else None
    return Path(path) if path is not None and not Path(path).is_file() else None


def refuse_absent_store(uri: str, reads: str) -> None:
    """Refuse, in one line, a job that reads `reads` (a registered model, a models:/ URI) from a SQLite store that
    does not exist: MLflow made an empty ./mlflow.db (the default store, relative) wherever the job ran, then failed
    with a traceback that the model is not registered."""
    path = absent_store(uri)
    if path is not None:
        raise ConfigError(f"{reads} is read from the tracking store {redact(uri)}, which does not exist (no file "
                          f"{str(path)!r}; this job makes no store to read from): set tracking.tracking_uri to the "
                          "store it was registered in")
