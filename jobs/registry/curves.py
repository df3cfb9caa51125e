"""A run's curves.png: every series it logged over steps that changed, one panel each (jobs/registry/tracking.py draws
it as a run finishes; a two-phase pretraining's phase runs, which hold its steps, draw their own)."""

from __future__ import annotations

import math
import tempfile
import textwrap
from pathlib import Path

CURVES = "curves.png"
MAX_PANELS = 48  # 12 rows of 4: past it (NER's F1 per entity type, many types) series are named under the panels
COLUMNS = 4
# what a panel's series is, by a word in its last name part: losses first, then scores, then throughput, the rest last
PANEL_ORDER = (("loss",), ("acc", "f1", "precision", "recall", "match", "corr", "exact"), ("per_s", "mfu"))


def curve_keys(names) -> list[str]:
    """The metrics log_curves draws (those logged over steps among them): train/*, eval/*, select/*, dev*."""
    return sorted(k for k in names if k.split("/", 1)[0] in ("train", "eval", "select") or k.startswith("dev"))


def curve(history) -> list[tuple[int, float]]:
    """A metric's (step, value) points, by step, the last logged point of each step: a run restarted from its
    checkpoint logs the steps since that checkpoint again, and both points drawn made a step's panel zig-zag."""
    last = {m.step: m.value for m in sorted(history, key=lambda m: m.timestamp)}
    return sorted(last.items())


def panel_order(key: str) -> tuple[int, str]:
    """Where `key`'s panel goes: losses, then accuracy, F1 and the other scores, then throughput, then the rest."""
    name = key.rsplit("/", 1)[-1].lower()
    return next((i for i, words in enumerate(PANEL_ORDER) if any(w in name for w in words)), len(PANEL_ORDER)), key


def panels(histories: dict, max_panels: int = MAX_PANELS) -> tuple[list[str], list[str], list[str]]:
    """(drawn, constant, over): the series that changed, in panel_order, up to `max_panels` drawn and the rest over;
    those that never changed (a counter at 0, a fixed learning rate) named only, unless no series changed at all.
    A cut of the first 12 by name drew counters and left a pretraining run's mlm_loss and mlm_acc out."""
    changed = sorted((k for k, h in histories.items() if len({v for _, v in h}) > 1), key=panel_order)
    constant = [k for k in sorted(histories, key=panel_order) if k not in changed]
    if not changed:
        changed, constant = constant, []
    return changed[:max_panels], constant, changed[max_panels:]


def log_curves(tracking_uri: str, run_id: str, max_panels: int = MAX_PANELS) -> str | None:
    """Every training and evaluation metric the run logged over steps (train/*, eval/*, select/*, dev*/...) that
    changed, one panel each in panel_order, COLUMNS to a row, as the run's artifact curves.png; None when it logged
    none. Series that stayed constant, and any past `max_panels` (said on the console too), are named under the
    panels. (Fine-tuning's curve is select/*, the split that chooses: it was left out.)"""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    keys = curve_keys(client.get_run(run_id).data.metrics)
    histories = {k: curve(client.get_metric_history(run_id, k)) for k in keys}
    histories = {k: h for k, h in histories.items() if len(h) > 1}
    if not histories:
        return None
    shown, constant, over = panels(histories, max_panels)
    if over:
        print(f"[tracking] {CURVES}: {len(over)} series past its {max_panels} panels named, not drawn: "
              f"{', '.join(over)}", flush=True)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(COLUMNS, len(shown))
    rows = math.ceil(len(shown) / cols)
    notes = [f"constant, not drawn: {', '.join(f'{k}={histories[k][-1][1]:g}' for k in constant)}"] * bool(constant)
    notes += [f"past {max_panels} panels, not drawn: {', '.join(over)}"] * bool(over)
    note = "\n".join(textwrap.fill(n, 40 * cols, break_on_hyphens=False) for n in notes)
    note_in = 0.2 * (note.count("\n") + 1) * bool(note) + 0.1  # inches under the panels
    fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 3 * rows + note_in), squeeze=False)
    for ax, key in zip(axes.flat, shown):
        steps, values = zip(*histories[key])
        ax.plot(steps, values, marker="." if len(steps) < 50 else None)
        ax.set_title(key, fontsize="small")
        ax.set_xlabel("step", fontsize="small")
    for ax in list(axes.flat)[len(shown):]:
        ax.axis("off")
    if note:
        fig.text(0.01, 0.01, note, fontsize="small", va="bottom")
    fig.tight_layout(rect=(0, note_in / (3 * rows + note_in), 1, 1))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / CURVES
        fig.savefig(path, dpi=90)
        plt.close(fig)
        client.log_artifact(run_id, str(path))
    return CURVES
