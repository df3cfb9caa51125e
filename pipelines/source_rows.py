"""The rows a corpus reader yields (pipelines/sources.py: DOCUMENT_COLUMNS): a good document, normalised, or a
reject with its reason and a sample of what was rejected."""

from __future__ import annotations

from pipelines.clean import normalize_text
from pipelines.config import DataConfig

SAMPLE_CHARS = 200


def decode_sample(data: bytes, encoding: str = "utf-8") -> str:
    return data[: SAMPLE_CHARS * 4].decode(encoding, errors="replace")[:SAMPLE_CHARS].rstrip("\r\n")


def reject_row(doc_id: str, source: str, reason: str, sample: str) -> dict:
    return {"doc_id": doc_id, "source": source, "text": "", "reject_reason": reason,
            "sample": sample[:SAMPLE_CHARS]}


def document_row(doc_id: str, source: str, text: str, cfg: DataConfig, raw: str = "") -> dict:
    """Normalise raw text into a good row, or reject it as empty / too short."""
    text = normalize_text(text)
    if not text:
        return reject_row(doc_id, source, "empty_document", raw)
    if len(text) < cfg.min_document_chars:
        return reject_row(doc_id, source, "too_short", text)
    return {"doc_id": doc_id, "source": source, "text": text, "reject_reason": "", "sample": ""}
