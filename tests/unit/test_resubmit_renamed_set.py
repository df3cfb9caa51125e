"""A resubmitted pretraining refused because its prepared set's name changed says that a pipeline update may have
renamed it: a set of data.dupe_factor > 1, or holding a Gutenberg book, a WikiExtractor .txt or MediaWiki XML, is
renamed though the user changed no setting (README, "How data flows")."""

import pytest

from bert_core.config import ConfigError
from jobs.runtime import resubmit
from tests.unit.test_continuation import BASIS, run_dir


def test_a_refusal_for_another_prepared_set_says_a_pipeline_update_may_have_renamed_it(tmp_path):
    d = run_dir(tmp_path)
    with pytest.raises(ConfigError) as refused:
        resubmit.check(d, {**BASIS, "prepared set": "set-9f8e"})
    assert "prepared set 'set-1a2b' -> 'set-9f8e'." in str(refused.value)
    assert str(refused.value).endswith("a pipeline update renamed it; README, \"How data flows\")")
    with pytest.raises(ConfigError) as refused:  # the same set, another model: no word of a renamed set
        resubmit.check(d, {**BASIS, "model.hidden_size": 128})
    assert "renamed" not in str(refused.value) and str(refused.value).endswith("to start over")
