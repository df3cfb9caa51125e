"""Fine-tuning's train.max_steps caps the steps the epochs give; transformers' max_steps overrides the epochs. A
max_steps the epochs never reach was dropped without a word (README's users come from the Trainer)."""

from jobs.config.finetune import FinetuneTrainConfig


def test_a_max_steps_beyond_the_epochs_is_said_not_silently_dropped():
    train = FinetuneTrainConfig(epochs=3, batch_size=16, max_steps=1000)
    per_epoch, total = train.steps(640)
    assert (per_epoch, total) == (40, 120)
    line = train.unreached_cap(total)
    assert line == ("[train] train.max_steps=1000 is a cap, not a length: train.epochs=3 give 120 steps, and the run "
                    "and its schedule end there; raise train.epochs to train longer")


def test_a_max_steps_the_epochs_reach_or_none_says_nothing():
    assert FinetuneTrainConfig(epochs=3, batch_size=16, max_steps=100).unreached_cap(100) == ""
    assert FinetuneTrainConfig(epochs=3, batch_size=16, max_steps=120).unreached_cap(120) == ""
    assert FinetuneTrainConfig(epochs=3, batch_size=16).unreached_cap(120) == ""
