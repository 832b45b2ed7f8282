"""GAM parameters: the buffer and its triggers (§3.3, App. A.2), the offline boundary detector, topic linking
(App. A.3) and graph-guided multi-factor retrieval (§3.4, §4.1, App. D).

Values the paper gives are its own (T_max 2048, top-5 candidates, k 10, β_time 1.4, β_role 1.4, β_conf 1.2);
the rest are named choices of ours, documented in docs/GAM.md. The detector's depth threshold and minimum
segment are calibrated for chats by `scripts/fit_gam_chat.py` on LoCoMo's dev conversations: the paper's own
topic granularity there (Table 10), and among settings near it the best dev recall. For meetings, whose topics
run ~115 utterances, `MEETING_DETECTOR` holds the fit of `scripts/fit_gam.py` on QMSum's train split only (also
the source of the relation calibration); a benchmark of meetings runs with it.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.core.schema import EngineSettings, setting

ABLATIONS = {
    "no-expansion": "anchors only: no first-order neighbours over topic relation edges (Eq. 9 without the union)",
    "no-mfr": "no multi-factor re-rank: every β is 1, P_sem alone ranks (the paper's w/o MFR)",
    "no-buffer": "retrieval ignores the active event graph (topics and their archived events only)",
    "no-lexical": "dense cosine only (no BM25 fusion) for anchors and P_sem",
}

MEETING_DETECTOR = {"tiling_window": 24, "depth_threshold": 0.3, "min_segment": 10}   # QMSum train's fit

TOKENIZERS = {"minilm-wordpiece": "the WordPiece tokenizer of all-MiniLM-L6-v2 (its tokenizer.json, no special "
                                  "tokens), shipped with the embedder",
              "words": "whitespace-separated words"}
TAILS_SESSION = {"flush": "the tail is consolidated too (the session is over)",
                 "keep": "the tail stays in the buffer and continues into the next session"}
TAILS_OVERFLOW = {"keep": "complete segments are consolidated and the tail stays, unless it is over "
                          "tail_keep_share of T_max (then it is cut too)",
                  "cut": "forced cut: the tail is consolidated with the complete segments"}
TAILS_MANUAL = {"flush": "the tail is consolidated too", "keep": "only complete segments are consolidated"}
RERANKERS = {"bi-encoder": "P_sem from the embedder's cosine fused with BM25 (the offline substitute for the "
                           "paper's cross-encoder/ms-marco-MiniLM-L-6-v2, which this machine cannot download)"}


@dataclass
class GamSettings(EngineSettings):
    # the episodic buffer and its sparse triggers (§3.3, App. A.2)
    t_max: int = setting(2048, "T_max: buffer capacity in tokens; above it, overflow triggers consolidation",
                         minimum=64, maximum=32768, group="buffer")
    tokenizer: str = setting("minilm-wordpiece", "tokenizer that counts the buffer's tokens", choices=TOKENIZERS,
                             group="buffer")
    session_end_tail: str = setting("flush", "at a session end, the segment after the last boundary",
                                    choices=TAILS_SESSION, group="buffer")
    overflow_tail: str = setting("keep", "on an overflow, the segment after the last boundary",
                                 choices=TAILS_OVERFLOW, group="buffer")
    tail_keep_share: float = setting(0.75, "on an overflow, the tail is kept only up to this share of T_max "
                                          "tokens (so the next overflow is at least the rest away)",
                                     minimum=0.0, maximum=0.95, step=0.05, group="buffer")
    manual_tail: str = setting("flush", "on a manual trigger, the segment after the last boundary",
                               choices=TAILS_MANUAL, group="buffer")
    # the offline boundary detector f_θ: embedding TextTiling (calibrated on LoCoMo dev; meetings: MEETING_DETECTOR)
    tiling_window: int = setting(24, "w: utterances averaged on each side of a gap", minimum=1, maximum=50,
                                 group="detector")
    depth_threshold: float = setting(0.1, "ε proxy: a gap whose depth score reaches this is a boundary",
                                     minimum=0.0, maximum=2.0, step=0.01, group="detector")
    min_segment: int = setting(4, "fewest utterances between two boundaries", minimum=1, maximum=500,
                               group="detector")
    # coarse-to-fine topic linking (§3.3, App. A.3)
    link_candidates: int = setting(5, "K: topics by vector similarity offered to the relation role", minimum=1,
                                   maximum=50, group="linking")
    tau: float = setting(0.5, "τ: an edge only when the relation's confidence is above it", minimum=0.0,
                         maximum=1.0, step=0.05, group="linking")
    relation_a: float = setting(0.789, "a: offline relatedness σ(a·cos + c·ln d + b), weight of the summaries' "
                                      "cosine", minimum=-100.0, maximum=100.0, step=0.001, group="linking")
    relation_c: float = setting(-1.605, "c: offline relatedness σ(a·cos + c·ln d + b), weight of the log distance "
                                      "d in the sequence of topics (1 = consecutive)", minimum=-100.0, maximum=100.0,
                                step=0.001, group="linking")
    relation_b: float = setting(-0.392, "b: offline relatedness σ(a·cos + c·ln d + b), the bias", minimum=-100.0,
                                maximum=100.0, step=0.001, group="linking")
    link_review: str = setting("gate", "who decides topic edges: the gate at τ inside the trigger (the paper), "
                                       "or a person later (they wait in the linking buffer)",
                               choices={"gate": "the gate decides in the consolidation state",
                                        "person": "edges wait for review on the Consolidation page"},
                               group="linking")
    # graph-guided multi-factor retrieval (§3.4, §4.1, App. D)
    k: int = setting(10, "k: topic anchors by vector similarity", minimum=1, maximum=100, group="retrieval")
    anchor_lexical_weight: float = setting(0.5, "weight of z(BM25) fused with z(cosine) for topic anchors",
                                           minimum=0.0, maximum=5.0, step=0.1, group="retrieval")
    rerank_model: str = setting("bi-encoder", "the model behind P_sem", choices=RERANKERS, group="retrieval")
    rerank_lexical_weight: float = setting(0.5, "w: weight of z(BM25) in the relevance r = z(cos) + w · z(BM25)",
                                           minimum=0.0, maximum=5.0, step=0.1, group="retrieval")
    psem_center: float = setting(2.0, "P_sem = σ(slope · (r − center)): the relevance r at which P_sem is 0.5",
                                 minimum=-5.0, maximum=10.0, step=0.1, group="retrieval")
    psem_slope: float = setting(2.0, "P_sem = σ(slope · (r − center)): how sharply P_sem rises with r",
                                minimum=0.1, maximum=10.0, step=0.1, group="retrieval")
    beta_time: float = setting(1.4, "β_time: time-sensitive query and a memory with a temporal expression",
                               minimum=1.0, maximum=3.0, step=0.05, group="retrieval")
    beta_role: float = setting(1.4, "β_role: the memory's speaker is named in the query", minimum=1.0, maximum=3.0,
                               step=0.05, group="retrieval")
    beta_conf: float = setting(1.2, "β_conf: the memory passed the self-consistency check at consolidation",
                               minimum=1.0, maximum=3.0, step=0.05, group="retrieval")
    consistency_keywords: int = setting(1, "the self-consistency check: an event shares at least this many of "
                                           "its topic's keywords", minimum=1, maximum=10, group="retrieval")
    buffer_k: int = setting(16, "events of the active buffer taken as candidates", minimum=0, maximum=200,
                            group="retrieval")
    final_k: int = setting(16, "events returned", minimum=1, maximum=200, group="retrieval")
    ablations: list = setting(help="ablation switches", factory=list, choices=ABLATIONS, group="ablations")

    def __post_init__(self) -> None:
        self.check_ablations(ABLATIONS)
        self.check_bounds()
