"""All-Mem parameters (App. F.4 defaults) and the App. H ablation switches."""
from __future__ import annotations

from dataclasses import dataclass

from engine.core.schema import EngineSettings, setting
from engine.engines.allmem.schema import ABLATIONS


@dataclass
class AllMemSettings(EngineSettings):
    # online write
    write_anchors: int = setting(5, "Top-k visible anchors found for each new unit", minimum=1, maximum=50,
                                 group="online write")
    online_semantic_links: int = setting(3, "σ links a new unit makes to its anchors (\"a few\")", minimum=0,
                                         maximum=20, group="online write")
    semantic_min_cosine: float = setting(0.35, "an anchor needs at least this cosine to get a σ link",
                                         minimum=0.0, maximum=1.0, step=0.05, group="online write")
    # degree caps (App. B.1); version edges are never pruned
    cap_temporal: int = setting(1, "τ out-degree cap", minimum=1, maximum=5, group="degree caps", advanced=True)
    cap_semantic: int = setting(6, "σ out-degree cap", minimum=1, maximum=50, group="degree caps", advanced=True)
    cap_sibling: int = setting(2, "β out-degree cap", minimum=1, maximum=10, group="degree caps", advanced=True)
    # consolidation (App. C.2)
    theta: dict = setting(help="gate θ per operator: a proposal passes iff its confidence reaches it",
                          factory=lambda: {"split": 0.9, "merge": 0.9, "update": 0.9}, minimum=0.0, maximum=1.0,
                          step=0.05, group="consolidation")
    gamma_merge: float = setting(0.7, "merge coherence γ (mean pairwise cosine of the sources)", minimum=0.0,
                                 maximum=1.0, step=0.05, group="consolidation")
    diagnosis_anchors: int = setting(5, "anchor neighbourhood diagnosed with each buffered unit", minimum=1,
                                     maximum=20, group="consolidation", advanced=True)
    merge_max: int = setting(4, "most units one Merge may take", minimum=2, maximum=8, group="consolidation",
                             advanced=True)
    max_keywords: int = setting(20, "keywords kept per descriptor", minimum=1, maximum=100,
                                group="consolidation", advanced=True)
    max_summary_chars: int = setting(2000, "longest descriptor summary a plan may give", minimum=100,
                                     maximum=20000, group="consolidation", advanced=True)
    # retrieval (App. F.4)
    k: int = setting(10, "Stage-1 anchors: visible units retrieval starts from", minimum=1, maximum=100,
                     group="retrieval")
    hops: int = setting(2, "Stage-2 hop limit H_q", minimum=0, maximum=5, group="retrieval")
    budget: int = setting(40, "Stage-2 candidate budget L", minimum=1, maximum=500, group="retrieval")
    final_k: int = setting(16, "units returned after Stage-3 re-ranking (K)", minimum=1, maximum=100,
                           group="retrieval")
    lexical_weight: float = setting(0.5, "weight of z(BM25) fused with z(dense cosine)", minimum=0.0,
                                    maximum=5.0, step=0.1, group="retrieval")
    # Stage 3 prefers up-to-date evidence (All-Mem §4.7): a unit an Update superseded loses this much, in
    # units of the visible surface's score spread, so it ranks below its current version. What a Merge or a
    # Split archived is regrouped, not stale, and competes on its own relevance when Stage 2 recovers it.
    archived_penalty: float = setting(0.5, "Stage-3 penalty of superseded units, in z units", minimum=0.0,
                                      maximum=5.0, step=0.1, group="retrieval")
    ablations: list = setting(help="App. H ablation switches", factory=list, choices=ABLATIONS, group="ablations")

    def __post_init__(self) -> None:
        self.check_ablations(ABLATIONS)
