"""The signature a served model of single texts is logged with (model_logging.texts_signature): its outputs were
batch prediction's columns alone, while the model answers `truncated` beside them (kinds.SERVED_COLUMNS); pair and
question-answering models are logged with the same kind of signature (no input schema: the model reads columns by
name)."""

import pytest

from jobs.inference.kinds import OUTPUT_COLUMNS, SERVED_COLUMNS
from jobs.registry.model_logging import texts_signature


@pytest.mark.parametrize("kind", sorted(OUTPUT_COLUMNS))
def test_a_texts_signature_names_every_column_the_served_model_answers(kind):
    signature = texts_signature(kind)
    assert signature.inputs is None
    types = {c.name: c.type.name for c in signature.outputs.inputs}
    assert list(types) == list(SERVED_COLUMNS[kind])
    if kind != "token-classification":  # a tagger windows a long text, never cuts it: no `truncated`
        assert types["truncated"] == "boolean"
