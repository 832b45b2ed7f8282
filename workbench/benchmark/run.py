"""The Benchmark page's run form: the datasets it offers and one `memwb bench` run in the page's process."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.store.data_paths import shared_data


@dataclass(frozen=True)
class DataChoice:
    label: str
    dataset: str                        # the kind memwb bench --dataset takes
    path: Path


def data_choices() -> list[DataChoice]:
    """The datasets the run form offers: the bundled demo, the causal suite's validation and train splits (the
    train split's scenarios were written apart from the rest: how a setting carries), and the LoCoMo dev file and
    QMSum test meetings when they are on this machine."""
    from workbench.model import DEMO_PATH, LOCOMO_PATH, ROOT

    suite = ROOT / "datasets" / "causal"
    choices = [DataChoice("bundled demo (demo.jsonl)", "locomo", DEMO_PATH),
               DataChoice("causal suite · validation split", "causal", suite / "validation.jsonl"),
               DataChoice("causal suite · train split", "causal", suite / "train.jsonl")]
    if LOCOMO_PATH.is_file():
        choices.insert(1, DataChoice(f"LoCoMo dev ({LOCOMO_PATH.name})", "locomo", LOCOMO_PATH))
    qmsum = shared_data() / "qmsum" / "test"
    if qmsum.is_dir():
        choices.append(DataChoice("QMSum test meetings", "qmsum", qmsum))
    return choices


def run_benchmark(choice: DataChoice, engines: list[str], ablations: list[str], protocol: str, rounds: int,
                  progress) -> Path:
    """Run `memwb bench` in this process into a new folder under the workspace's benchmarks/; `workbench.replay.progress` hears
    each step (done, total, label). Returns the result file."""
    from engine.bench.config import BenchConfig  # only when a run is asked for
    from engine.bench.runner import run_benchmark as run

    config = BenchConfig(dataset=choice.dataset, source=str(choice.path), engines=tuple(engines),
                         ablations=tuple(ablations), protocol=protocol, rounds=int(rounds))
    return Path(run(config, progress=progress))
