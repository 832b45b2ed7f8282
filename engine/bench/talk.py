"""The kind of talk a conversation holds, and what an engine runs with on it: one home for `memwb bench`,
`memwb replay` and the Replay page.

A dataset says what kind of talk it holds (`DatasetSpec.talk`: QMSum's meetings; every other one chats) and the
schedule offline processes run on over it; an engine may carry settings fit on a kind of talk its defaults were
not (`EngineSchema.fits`: GAM's `meetings`, from QMSum train). A benchmark of meetings runs GAM with that fit and
the meeting schedule, and so does a replay of a file the loader recognises as a meeting: both ask `talk_fit`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.bench.datasets import DATASETS, DatasetSpec, file_format
from engine.engines import engine_schema, known_engines

DEFAULT_TALK = "chats"       # what every engine's defaults were made for
FIT_META = "fit"             # session meta: the kind of talk whose fit a replay applied ("meetings")


@dataclass(frozen=True)
class TalkFit:
    """What a replay of one kind of talk runs an engine with, beside its defaults."""

    talk: str                # "meetings"
    dataset: str             # the dataset of that talk, as `memwb bench --dataset` names it ("qmsum")
    engine_label: str
    settings: dict           # the engine's fit for this talk (`EngineSchema.fits`); {} when it has none
    schedule: str            # the engine's own schedule, else the dataset's

    @property
    def key(self) -> str:
        """Where the fit lives in the engine's schema ("fits.meetings"), or "" for no fit."""
        return f"fits.{self.talk}" if self.settings else ""

    def text(self) -> str:
        """The summary line's and the page header's sentence: what was applied and why."""
        fit = ", ".join(f"{k}={v}" for k, v in sorted(self.settings.items()))
        what = (f"{self.engine_label}'s fit for {self.talk} ({self.key}: {fit})" if self.settings
                else f"no {self.engine_label} fit for {self.talk} (its defaults)")
        return f"{what} and schedule {self.schedule}, as memwb bench --dataset {self.dataset} runs it"


def fit_settings(engine: str, spec: DatasetSpec) -> dict:
    """The engine's settings fit for the dataset's kind of talk ({} when it has none)."""
    return dict(engine_schema(engine).fits.get(spec.talk, {})) if engine in known_engines() else {}


def fit_schedule(engine: str, spec: DatasetSpec, given: str | None = None) -> str:
    """`given` (a `--schedule`/`--consolidate`) when there is one, else the engine's own schedule (RecMem
    consolidates at its trigger), else the dataset's."""
    own = engine_schema(engine).schedule if engine in known_engines() else ""
    return given or own or spec.schedule


def dataset_of_file(path: str | Path) -> DatasetSpec | None:
    """The dataset whose format the file is in, the first one listed (a JSONL or LoCoMo file: chats)."""
    fmt = file_format(Path(path))
    return next((spec for spec in DATASETS.values() if fmt in spec.formats), None)


def talk_fit(engine: str, path: str | Path) -> TalkFit | None:
    """What a replay of `path` into `engine` runs with because of the talk the file holds; None for chats (the
    defaults were made for them)."""
    return dataset_fit(engine, dataset_of_file(path))


def dataset_fit(engine: str, spec: DatasetSpec | None) -> TalkFit | None:
    """`talk_fit` for a file of `spec`'s format."""
    if spec is None or spec.talk == DEFAULT_TALK:
        return None
    return TalkFit(spec.talk, spec.name, engine_schema(engine).label, fit_settings(engine, spec),
                   fit_schedule(engine, spec))


def with_fit(fit: TalkFit | None, settings: dict | None) -> dict:
    """The settings a replay runs with: the talk's fit under those given (`--set`, a changed form field)."""
    return {**(fit.settings if fit else {}), **(settings or {})}
