"""A prepared set's counts (manifest.json's "counts") from its shard tasks' totals and the read's rejects; a set of no
document is refused here, before prepare caches it: with data.tokenizer.path set, a corpus whose every record was
rejected (a parquet column named "content", UTF-16 files) was "done: 0 examples", reused as such on every later run,
and the pretraining's first error was about its held-out split."""

from __future__ import annotations

from pipelines.rejects import RejectLog, nothing_kept_said, rejected_documents
from pipelines.source_files import SourceError


def set_counts(totals: dict[str, int], shards: dict[str, list[dict]], rejects: RejectLog) -> dict[str, int]:
    """`totals`: the shard tasks' stats summed (prepare._build_shard's columns); `shards`: their rows by split."""
    counts = {
        # every document the readers gave: kept, without a sentence, or rejected (cuts of NOT_DOCUMENTS are none)
        "documents_read": totals["documents"] + totals["documents_empty"] + rejected_documents(rejects.counts),
        "documents_kept": totals["documents"],
        "documents_without_sentences": totals["documents_empty"],
        "sentences": totals["sentences"],
        "examples_train": sum(s["rows"] for s in shards["train"]),
        "examples_eval": sum(s["rows"] for s in shards["eval"]),
        "tokens": totals["tokens"],
        "random_next": totals["random_next"],
        "sentences_dropped": totals["sentences_dropped"],  # one-token last sentences alone in a chunk, per dupe pass
        # longer than an example holds (a list or table without . ! ?): cut into pieces, each in some example
        "sentences_cut": totals["sentences_cut"],
        "unknown_tokens": totals["unknown_tokens"],  # [UNK] in the examples, before masking (dupe passes each)
    }
    counts["examples"] = counts["examples_train"] + counts["examples_eval"]
    if not counts["documents_kept"]:
        raise SourceError(nothing_kept_said(rejects, "prepare a set from", counts["documents_without_sentences"]))
    return counts


UNKNOWN_SHARE = 0.01  # of a set's tokens [UNK] past which prepare warns


def unknown_tokens_warning(counts: dict[str, int], given_tokenizer: str | None) -> str | None:
    """A line where more than UNKNOWN_SHARE of the prepared examples' tokens are [UNK] (counted before masking): text
    the model never sees. A given tokenizer (`given_tokenizer`, data.tokenizer.path) is not checked on a sample as a
    trained one is (tokenizer_sample.unknown_pieces_warning): an English vocabulary on a Greek or Thai corpus made
    [UNK] of most words, and prepare said nothing."""
    unknown, tokens = counts.get("unknown_tokens", 0), counts["tokens"]
    if not tokens or unknown <= UNKNOWN_SHARE * tokens:
        return None
    fix = (f"the vocabulary of {given_tokenizer} lacks this corpus's characters or words: give a tokenizer made for "
           "its language(s), or leave data.tokenizer.path unset to train one on it" if given_tokenizer else
           "the tokenizer warning above says why")
    return (f"{unknown / tokens:.1%} of the examples' tokens are [UNK] ({unknown:,} of {tokens:,}), text the model "
            f"never sees: {fix}")
