"""data.max_line_bytes has no unlimited setting: null (what a YAML `max_line_bytes:` with no value, or `~`, gives) was a
TypeError comparing None with 1, and the refusal of 0 or -1 said "none means unlimited", which reads as if null
lifted the limit."""

import pytest

from bert_core.config import ConfigError
from pipelines.config import DataConfig


@pytest.mark.parametrize("value", [None, "8MiB", 4.5, True, 0, -1])
def test_a_max_line_bytes_that_is_no_positive_int_is_refused_naming_the_field(value):
    with pytest.raises(ConfigError, match=r"data\.max_line_bytes must be >= 1 \(an integer of bytes; there is no "
                                          r"unlimited setting: .*\), got ") as refused:
        DataConfig(sources=["x.txt"], max_line_bytes=value).validate()
    assert "none means unlimited" not in str(refused.value)


def test_a_positive_max_line_bytes_passes():
    assert DataConfig(sources=["x.txt"], max_line_bytes=1).validate().max_line_bytes == 1
    assert DataConfig(sources=["x.txt"], max_line_bytes=64 << 20).validate().max_line_bytes == 64 << 20
