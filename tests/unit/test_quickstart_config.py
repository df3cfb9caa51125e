"""jobs/quickstart.py's two configs, read as one: what `--check` passes, the whole run (pretraining, then the sweep)
must not refuse after the pretraining; and an error names the field as the quickstart's overrides name it."""

import re

import pytest

from bert_core.config import ConfigError
from jobs import quickstart
from pipelines.harvest import harvest_installed_docs


def test_a_pretraining_harvest_of_another_size_is_the_one_the_sweep_reads(tmp_path, monkeypatch, capsys):
    """`make quickstart ARGS="pretrain.corpus.harvest_max_mb=16"` passed --check, pretrained on a 16 MB harvest, then
    the sweep's pkgdocs task asked the same folder for its default 8 MB and was refused ("holds a harvest made with
    max_mb=16") after the whole pretraining. Harvested here as both halves harvest, at a size that takes a second."""
    monkeypatch.chdir(tmp_path)  # the configs' relative folders (data/corpus/installed-docs, runs, mlflow.db)
    overrides = ["pretrain.corpus.harvest_max_mb=0.02"]
    quickstart.main([*overrides, "--check", "--verbose"])
    assert ": valid; nothing was run" in capsys.readouterr().out
    pretrain, sweep = quickstart.load(quickstart.PRETRAIN, quickstart.SWEEP, overrides)
    task = sweep.finetune.task
    assert (task.name, task.harvest_max_mb) == ("pkgdocs", 0.02)
    made = harvest_installed_docs(pretrain.corpus.harvest_dir, max_mb=pretrain.corpus.harvest_max_mb)  # jobs/pretrain
    assert harvest_installed_docs(task.corpus_dir, max_mb=task.harvest_max_mb) == made  # jobs/loops/ft_tasks.py


def test_two_sizes_for_one_harvest_folder_are_refused_before_any_work(tmp_path):
    with pytest.raises(ConfigError, match=r"^sweep\.finetune\.task\.harvest_max_mb=8\.0 and "
                                          r"pretrain\.corpus\.harvest_max_mb=16\.0 name one folder \('data/corpus/"
                                          r"installed-docs'\), which holds one harvest"):
        quickstart.main(["pretrain.corpus.harvest_max_mb=16", "sweep.finetune.task.harvest_max_mb=8", "--check"])
    # a folder of its own, or no harvest in pretraining: each size is its own
    _, sweep = quickstart.load(quickstart.PRETRAIN, quickstart.SWEEP, [
        "pretrain.corpus.harvest_max_mb=16", f"sweep.finetune.task.corpus_dir={tmp_path}/docs"])
    assert sweep.finetune.task.harvest_max_mb == 8
    _, sweep = quickstart.load(quickstart.PRETRAIN, quickstart.SWEEP, [
        "pretrain.corpus.harvest_max_mb=16", "pretrain.corpus.harvest_installed_docs=false",
        f"pretrain.data.sources=[{tmp_path}]"])
    assert sweep.finetune.task.harvest_max_mb == 8


@pytest.mark.parametrize("override, error", [
    ("pretrain.train.max_step=3", r"^unknown key 'pretrain\.train\.max_step'; allowed: \['checkpoint_every', .*\]; "
                                  r"did you mean 'pretrain\.train\.max_steps'\?$"),
    ("pretrain.trian.max_steps=3", r"^unknown key 'pretrain\.trian'; allowed: \['pretrain\.corpus', .*\]; "
                                   r"did you mean 'pretrain\.train'\?$"),
    ("pretrain.model.recipe=modrn", r"^pretrain\.model\.recipe must be one of \('bert', 'modern'\), got 'modrn'$"),
    ("pretrain.deepspeed.offload_params=true", r"^pretrain\.deepspeed\.offload_params needs "
                                               r"pretrain\.deepspeed\.zero_stage=3$"),
    ("sweep.finetune.train.max_step=3", r"^unknown key 'sweep\.finetune\.train\.max_step'; .*did you mean "
                                        r"'sweep\.finetune\.train\.max_steps'\?$"),
    ("sweep.num_sample=3", r"^unknown key 'sweep\.num_sample'; .*did you mean 'sweep\.num_samples'\?$"),
    ("sweep.finetune.train.epochs=-1", r"^sweep\.finetune\.train\.epochs must be >= 1, got -1$"),
])
def test_an_error_names_the_field_as_the_quickstart_takes_it(override, error):
    """`jobs/quickstart.py pretrain.train.max_step=3` said "did you mean 'train.max_steps'?", and the quickstart
    refuses an override without its `pretrain.` / `sweep.` prefix: the suggestion was one more error."""
    with pytest.raises(ConfigError, match=error) as e:
        quickstart.main([override, "--check"])
    suggested = re.search(r"did you mean '(.+)'\?$", str(e.value))
    if suggested and suggested.group(1).endswith(("max_steps", "num_samples")):  # what the error suggests is taken
        quickstart.load(quickstart.PRETRAIN, quickstart.SWEEP, [f"{suggested.group(1)}=100"])


def test_a_dotted_value_and_a_file_name_keep_their_words(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"^pretrain\.data\.sources\[0\] must be .*, got 'train\.txt'"):
        quickstart.main(["pretrain.corpus.harvest_installed_docs=false", "pretrain.data.sources=[train.txt]",
                         "--check", "--verbose"])
    with pytest.raises(ConfigError, match=r"^config file 'train\.yaml' does not exist$"):
        quickstart.main(["--pretrain-config", "train.yaml", "--check"])


def test_a_fine_tuning_length_past_what_pretraining_trains_is_refused_before_any_work():
    """`jobs/quickstart.py --check sweep.finetune.task.max_seq_len=1024` passed, and a real run pretrained for minutes
    before the sweep's check_init refused the length its release was trained at (128: position rows past it never
    learned). Refused here, naming both fields; a pretraining that trains that long (data.max_seq_len, or phase 2)
    passes, and so do the README's quickstart commands."""
    for length in (129, 1024):
        with pytest.raises(ConfigError, match=rf"^sweep\.finetune\.task\.max_seq_len={length} exceeds the 128 tokens "
                                              r"the pretraining trains \(pretrain\.data\.max_seq_len=128\).*allowed: "
                                              r"sweep\.finetune\.task\.max_seq_len <= 128"):
            quickstart.load(quickstart.PRETRAIN, quickstart.SWEEP, [f"sweep.finetune.task.max_seq_len={length}"])
    with pytest.raises(ConfigError, match=r"^sweep\.finetune\.task\.max_seq_len=512 exceeds the 256 tokens the "
                                          r"pretraining trains \(pretrain\.phase2\.max_seq_len=256\)"):
        quickstart.load(quickstart.PRETRAIN, quickstart.SWEEP, ["pretrain.phase2.max_steps=10",
                                                                "pretrain.phase2.max_seq_len=256",
                                                                "sweep.finetune.task.max_seq_len=512"])
    for overrides in (["pretrain.data.max_seq_len=256", "sweep.finetune.task.max_seq_len=256"],
                      ["pretrain.phase2.max_steps=10", "sweep.finetune.task.max_seq_len=512"],
                      [], ["pretrain.model.recipe=modern"], ["pretrain.train.max_steps=1000", "sweep.num_samples=8"]):
        quickstart.load(quickstart.PRETRAIN, quickstart.SWEEP, overrides)
