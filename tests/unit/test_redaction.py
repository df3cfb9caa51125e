"""What jobs/registry/redaction.py removes from a URL and what it must leave: Azure's adlfs URLs name their container
where other URLs carry a user (abfs://container@account.dfs.core.windows.net/path), and a redacted one was data
promotion refused to read."""

import pytest

from jobs.registry.redaction import REDACTED, redact

AZURE = ["abfs://reviews@myacct.dfs.core.windows.net/train.csv", "abfss://reviews@myacct.dfs.core.windows.net/b.csv",
         "wasb://reviews@myacct.blob.core.windows.net/train.csv", "wasbs://reviews@myacct.blob.core.windows.net/x.json",
         "az://reviews@myacct.dfs.core.windows.net/train.csv", "ABFSS://reviews@myacct.dfs.core.windows.net/t.csv",
         "abfs://reviews/train.csv", "abfss://reviews@myacct.dfs.core.windows.net:443/train.csv"]


@pytest.mark.parametrize("url", AZURE)
def test_an_azure_container_name_is_no_credential(url):
    """`abfs://reviews@myacct...` became `abfs://***@myacct...` in the task_config tag and lineage.task_source;
    promotion then asked for the file again (and dropped its same-data check)."""
    assert redact(url) == url
    assert redact({"task": {"train_file": url, "dev_file": url}}) == {"task": {"train_file": url, "dev_file": url}}
    assert redact(f"could not read {url}: FileNotFoundError") == f"could not read {url}: FileNotFoundError"


def test_azure_passwords_sas_signatures_and_other_schemes_users_are_still_removed():
    # a password after the container's name is one
    assert redact("abfs://reviews:S3CRET@myacct.dfs.core.windows.net/train.csv") == \
        "abfs://***@myacct.dfs.core.windows.net/train.csv"
    assert redact("wasbs://c:k3y/x@myacct.blob.core.windows.net/t.csv") == \
        "wasbs://***@myacct.blob.core.windows.net/t.csv"
    # an Azure SAS: its signature goes, the container and the SAS's other fields (no secret) stay
    sas = "sv=2022-11-02&ss=b&srt=co&sp=rl&se=2030-01-01T00:00:00Z&spr=https&sig=Zm9vYmFy%3D"
    for url in ("https://myacct.blob.core.windows.net/reviews/train.csv",
                "abfs://reviews@myacct.dfs.core.windows.net/t.csv"):
        assert redact(f"{url}?{sas}") == f"{url}?{sas.replace('Zm9vYmFy%3D', REDACTED)}"
    assert redact("DefaultEndpointsProtocol=https;AccountName=myacct;AccountKey=YWJj/ZA==") == \
        "DefaultEndpointsProtocol=https;AccountName=myacct;AccountKey=***"
    # every other scheme: a user alone may be the secret (https://ghp_TOKEN@github.com), as before
    assert redact("s3://AKIAKEY:SECRET@bucket/train.csv") == "s3://***@bucket/train.csv"
    assert redact("https://user:token@host/train.csv") == "https://***@host/train.csv"
    assert redact("https://ghp_TOKEN@github.com/o/r.git") == "https://***@github.com/o/r.git"
    assert redact("gs://k3y@bucket/x") == "gs://***@bucket/x"
    # a scheme that only ends like Azure's is not Azure's
    assert redact("xabfs://ghp_TOKEN@host/x") == "xabfs://***@host/x"
    # several URLs in one message: each by its own scheme
    assert redact("abfs://reviews@myacct.dfs.core.windows.net/t.csv or https://u:p@h/t.csv") == \
        "abfs://reviews@myacct.dfs.core.windows.net/t.csv or https://***@h/t.csv"


def test_a_run_started_from_azure_data_keeps_its_container_in_params_and_lineage(tmp_path):
    """What start_run writes (it redacts the params and tags): the container, so the registered task names readable
    data."""
    from mlflow.tracking import MlflowClient

    from jobs.registry import tracking

    url = "abfs://reviews@myacct.dfs.core.windows.net/train.csv"
    uri = f"sqlite:///{tmp_path}/m.db"
    tags = {"task": "files", "lineage.task_source": url, "lineage.task_data_sha256": "0" * 64}
    run_id = tracking.start_run(uri, "azure", str(tmp_path / "art"), "finetune", {"task": {"train_file": url}}, tags)
    run = MlflowClient(uri).get_run(run_id)
    assert run.data.params["task.train_file"] == url and run.data.tags["lineage.task_source"] == url


def test_odbc_passwords_are_removed_plain_braced_and_percent_encoded():
    """An ODBC connection string's `Pwd=` (no name SECRET_PARTS knew) and SQLAlchemy's percent-encoded form of one
    (`?odbc_connect=...%3BPWD%3D...`: no literal '=' to match) were logged as given."""
    odbc = "Driver={ODBC Driver 18 for SQL Server};Server=x;Uid=u;Pwd=hunter2;"
    assert redact(odbc) == "Driver={ODBC Driver 18 for SQL Server};Server=x;Uid=u;Pwd=***;"
    assert redact("Driver={x};Server=x;PWD={a;b}}c};Uid=u") == "Driver={x};Server=x;PWD=***;Uid=u"  # braced: ; in it
    assert redact({"db": {"odbc_pwd": "hunter2"}}) == {"db": {"odbc_pwd": REDACTED}}
    url = "mssql+pyodbc:///?odbc_connect=DRIVER%3D%7BODBC+Driver+18%7D%3BSERVER%3Dx%3BUID%3Du%3BPWD%3Dsecret"
    assert redact(url) == url.replace("%3Dsecret", f"%3D{REDACTED}")
    assert redact(f"could not connect to '{url}': timeout") == f"could not connect to '{url}': timeout".replace(
        "%3Dsecret", f"%3D{REDACTED}")
    # lower-case escapes, the secret first, the parameters after it kept
    assert redact("mssql+pyodbc:///?odbc_connect=pwd%3ds3cr%2Fet%3bUID%3du") == \
        f"mssql+pyodbc:///?odbc_connect=pwd%3d{REDACTED}%3bUID%3du"
    assert redact("DRIVER%3D%7BODBC%7D%3BPwd%3Dsecret") == f"DRIVER%3D%7BODBC%7D%3BPwd%3D{REDACTED}"
    # an encoded ';' inside a plain `password=` value is part of it, as before
    assert redact("https://h/x?password=ab%3Bcd&x=1") == f"https://h/x?password={REDACTED}&x=1"


def test_a_message_of_many_nested_parameters_is_redacted_not_crashed():
    """Each non-secret parameter's value was searched by a recursive call: `k=k=...` (400 links) or `?a=a=...` (5000)
    raised RecursionError, and redact runs on a job's error message, whose real error it then hid."""
    for text in ("k=" * 400, "?" + "a=" * 5000):
        out = redact(text)
        assert isinstance(out, str) and out.startswith(text[:10])
        assert redact(f"job failed: {text}").startswith("job failed: ")
    # a secret nested past the levels searched is still no secret in the output
    assert "hunter2" not in redact("x=" * 400 + "password=hunter2")
    assert "hunter2" not in redact("https://h/x?next=" + "a%3D" * 300 + "pwd%3Dhunter2")
    # the ordinary nesting keeps working: odbc_connect's value is searched, the name after the secret kept
    assert redact("https://h/x?a=1&next=b=2;Pwd=hunter2;c=3&sig=abc") == \
        f"https://h/x?a=1&next=b=2;Pwd={REDACTED};c=3&sig={REDACTED}"
