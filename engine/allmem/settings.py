"""All-Mem parameters (App. F.4 defaults) and the App. H ablation switches."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

ABLATIONS = {
    "no-visibility": "never archive: every unit stays on the visible surface",
    "no-split": "consolidation without the Split operator",
    "no-merge": "consolidation without the Merge operator",
    "no-update": "consolidation without the Update operator",
    "anchors-only": "retrieval re-ranks Stage-1 anchors only (no Stage-2 expansion)",
    "no-recovery-links": "Stage-2 expansion does not follow version or sibling links",
    "no-type-priority": "Stage-2 expansion ignores link-type priority (id order only)",
    "no-lexical": "dense cosine only, as in the paper (no BM25 fusion)",
}


@dataclass
class AllMemSettings:
    # online write
    write_anchors: int = 5          # Top-k visible anchors for a new unit
    online_semantic_links: int = 3  # "a few" sigma attachments per new unit
    semantic_min_cosine: float = 0.35
    # degree caps (App. B.1); cap_version None = never pruned
    cap_temporal: int = 1
    cap_semantic: int = 6
    cap_sibling: int = 2
    # consolidation (App. C.2)
    theta: dict = field(default_factory=lambda: {"split": 0.9, "merge": 0.9, "update": 0.9})
    gamma_merge: float = 0.7
    diagnosis_anchors: int = 5
    merge_max: int = 4
    max_keywords: int = 20
    max_summary_chars: int = 2000
    # retrieval (App. F.4)
    k: int = 10
    hops: int = 2
    budget: int = 40
    final_k: int = 16
    lexical_weight: float = 0.5
    # Stage 3 prefers up-to-date evidence (All-Mem §4.7): archived units lose this much, in units of
    # the visible surface's score spread, so a superseded statement ranks below its current version.
    archived_penalty: float = 0.5
    ablations: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        unknown = [a for a in self.ablations if a not in ABLATIONS]
        if unknown:
            raise ValueError(f"unknown ablation(s) {unknown}; known: {sorted(ABLATIONS)}")

    def has(self, ablation: str) -> bool:
        return ablation in self.ablations

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "AllMemSettings":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})
