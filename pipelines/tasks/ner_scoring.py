"""Entity-level NER scoring: which scheme seqeval reads a tag set by (IOB1/IOB2, IOBES, BILOU, IOE), the check that
the task's rows are in the scheme the job names, and entity precision / recall / F1 (pipelines.tasks.conll's tags)."""

from __future__ import annotations

from collections.abc import Iterable


def iob1_openings(tag_rows: Iterable[list[str]]) -> tuple[int, int]:
    """(entities, those an I- tag opens) in sequences of tags: an entity opens at a B- tag, or at an I-X that follows
    neither B-X nor I-X. IOB2 opens every entity with B-; IOB1 (the Reuters CoNLL-2003 release) nearly every one
    with I- (B- only between two adjacent entities of one type)."""
    entities = by_i = 0
    for tags in tag_rows:
        previous = "O"
        for tag in tags:
            if tag[:2] == "B-" or (tag[:2] == "I-" and (previous[:2] not in ("B-", "I-") or previous[2:] != tag[2:])):
                entities += 1
                by_i += tag[:2] == "I-"
            previous = tag
    return entities, by_i


def scheme_checked(rows, kind: str, scheme: str):
    """`rows` (pipelines.tasks.roles.TaskRows), unless their entity tags are IOB1 where `scheme` is IOB2: strict IOB2
    reads no entity from an I- after O, so every such entity would be missing from both gold and predictions, and
    the F1 that chooses the checkpoint and judges the model would be that of the few B- entities. Refused then,
    naming the setting; a few I- openings (annotation slips in IOB2 data) are counted in one warning line. The rows
    read are the ones scored: select and evaluation (and train where it is on the driver). IOE tags (strict_scheme)
    are checked mirrored: IOE2 closes every entity with E-, IOE1 nearly every one with I- (E- only between two
    adjacent entities of one type), which strict IOE2 reads as no entity."""
    if kind != "token-classification" or scheme != "IOB2":
        return rows
    splits = [rows.select, *rows.evaluation.values()] + ([rows.train] if isinstance(rows.train, list) else [])
    tags = [r["ner_tags"] for split in splits for r in split if r.get("ner_tags")]
    ioe = strict_scheme(scheme, tags) == "IOE2"
    if ioe:  # read backwards with E- as B-, an IOE1 entity's closing I- is an IOB1 one's opening I-
        tags = [[f"B-{t[2:]}" if t[:2] == "E-" else t for t in reversed(sentence)] for sentence in tags]
    entities, by_i = iob1_openings(tags)
    ends, seen, one, two = ("close", "before neither I-X nor E-X", "IOE1", "IOE2") if ioe else \
        ("open", "after neither B-X nor I-X", "IOB1", "IOB2")
    if by_i * 2 > entities:
        from bert_core.config import ConfigError

        raise ConfigError(f"task.iob_scheme=IOB2, but {by_i} of the {entities} entities in the task's rows {ends} with "
                          f"I- (an I-X tag {seen}): these are {one} tags"
                          + ("" if ioe else ", as the original Reuters CoNLL-2003 files have them,")
                          + f" and strict {two} scoring would read none of those entities; set task.iob_scheme=IOB1"
                          + (" (conlleval's reading, which reads IOE1's entities)" if ioe else ""))
    if by_i:
        print(f"[data] warning: {by_i} of the {entities} entities in the task's rows {ends} with I- (an I-X tag "
              f"{seen}); strict {two} scoring (task.iob_scheme) reads no entity there", flush=True)
    return rows


def as_iobes(tags: list[list[str]]) -> list[list[str]]:
    """BMES tags (B-, M-, E-, S-: the usual scheme of Chinese NER data) read as the IOBES they are, M- for I-: seqeval
    knows no M-, and an unknown prefix would read no entity."""
    return [[f"I-{t[2:]}" if t.startswith("M-") else t for t in sentence] for sentence in tags]


def strict_scheme(scheme: str | None, *tags: list[list[str]]) -> str | None:
    """The scheme seqeval reads entities strictly by, or None for conlleval's reading (IOB1, none given). Tags with
    E-/S- (IOBES) or L-/U- (BILOU) prefixes in `tags` are read by their own scheme, whatever `scheme` says: IOB's
    readings took an S-X for no entity and an E-X for none either. I- and E- without B- or S- are IOE, of which
    strict IOBES, opening an entity at B- or S- only, read no entity: under IOB2 they are read strictly as IOE2,
    otherwise by conlleval's reading, which reads IOE1's entities too (seqeval's strict IOE1 reads no "I-X E-X")."""
    prefixes = {t[:2] for sentences in tags for sentence in sentences for t in sentence}
    if "E-" in prefixes and not prefixes & {"B-", "S-"}:
        return "IOE2" if scheme == "IOB2" else None
    if prefixes & {"E-", "S-"}:
        return "IOBES"
    if prefixes & {"L-", "U-"}:
        return "BILOU"
    return scheme if scheme == "IOB2" else None


def ner_metrics(gold_tags: list[list[str]], pred_tags: list[list[str]], scheme: str | None = None) -> dict[str, float]:
    """Entity-level micro precision / recall / F1 (an entity counts only if its type and exact span
    match, as conlleval), token accuracy, and f1_<TYPE> per entity type; computed by seqeval.

    scheme "IOB2" switches seqeval to strict mode: entities are read by IOB2's rules only (an I- after O opens no
    entity); "IOB1" and None are conlleval's reading, the official CoNLL-2003 scorer (seqeval's strict IOB1 reads no
    entity from a B-X after O or after another type, which conlleval and the Reuters files' own scoring do). IOBES
    and BILOU tags are read strictly by their own scheme, IOE tags as IOE2 under "IOB2" (strict_scheme).
    """
    from seqeval.metrics import accuracy_score, classification_report  # deferred: it imports scikit-learn and scipy

    kwargs = {}
    gold_tags, pred_tags = as_iobes(gold_tags), as_iobes(pred_tags)
    scheme = strict_scheme(scheme, gold_tags, pred_tags)
    if scheme is not None:
        from seqeval import scheme as schemes

        kwargs = {"mode": "strict", "scheme": getattr(schemes, scheme)}
    report = classification_report(gold_tags, pred_tags, output_dict=True, zero_division=0, **kwargs)
    micro = report["micro avg"]
    out = {"precision": float(micro["precision"]), "recall": float(micro["recall"]),
           "f1": float(micro["f1-score"]), "accuracy": float(accuracy_score(gold_tags, pred_tags))}
    for name, row in report.items():
        if not name.endswith(" avg"):
            out[f"f1_{name}"] = float(row["f1-score"])
    return out
