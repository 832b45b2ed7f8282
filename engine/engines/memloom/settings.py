"""MemLoom parameters: HDRA routing (App. A.3 defaults), lifecycle governance, steward policy Π_syn, BDSR caps."""
from __future__ import annotations

from dataclasses import dataclass

from engine.core.schema import EngineSettings, setting
from engine.core.segments import DepthRule

ABLATIONS = {
    "no-relations": "no logic track: the steward synthesises no relations and retrieval follows no logic links "
                    "(events and evidence pointers only)",
    "no-repair": "the steward neither repairs nor cuts the timeline (events stay as the router made them)",
    "no-traversal": "retrieval grounds the seed events only (no relation closure)",
    "no-realtime": "retrieval ignores the real-time buffer of uncurated sentence records",
    "no-router": "sentence records keep the raw text (no pronoun or date rewrite)",
    "no-lexical": "dense cosine only (no BM25 fusion)",
}


@dataclass
class MemLoomSettings(EngineSettings):
    # router (§3.2)
    router_window: int = setting(5, "earlier turns the router sees (H_{t-5:t-1})", minimum=0, maximum=20,
                                 group="router", label="H — router context (turns)")
    gate_min_tokens: int = setting(3, "gate: an utterance with fewer content words joins the latest event",
                                   minimum=0, maximum=20, group="router")
    # HDRA (§3.3, App. A.3)
    alpha: float = setting(0.9, "α: weight of g(cos(v_m, c_j))", minimum=0.0, maximum=2.0, step=0.05, group="HDRA",
                           label="α — similarity weight")
    beta: float = setting(0.1, "β: weight of the temporal decay exp(−λΔh)", minimum=0.0, maximum=1.0, step=0.05,
                          group="HDRA", label="β — recency weight")
    lam: float = setting(20.0, "λ: decay rate per day of Δh", minimum=0.0, maximum=200.0, step=1.0, group="HDRA",
                         label="λ — recency decay (per day)")
    gamma: float = setting(0.1, "γ: short-window gain B_sw", minimum=0.0, maximum=1.0, step=0.05, group="HDRA",
                           label="γ — short-window gain")
    tau_new: float = setting(0.30, "τ_new: NEW_EVENT when the best S_j is below it", minimum=0.0, maximum=1.0,
                             step=0.05, group="HDRA", label="τ_new — new-event threshold")
    join_window: int = setting(3, "S_join: only events updated within this many turns are joinable",
                               minimum=1, maximum=1000, group="HDRA", label="S_join — joinable window (turns)")
    short_window: int = setting(2, "B_sw = 1 for an event updated within this many turns", minimum=0, maximum=20,
                                group="HDRA", label="B_sw — short window (turns)")
    # lifecycle (§3.4, App. A.4)
    w1: float = setting(0.5, "maturity weight of the evidence count n", minimum=0.0, maximum=5.0, step=0.1,
                        group="lifecycle", label="w₁ — evidence-count weight")
    w2: float = setting(1.0, "maturity weight of the participant entropy H(p)", minimum=0.0, maximum=5.0,
                        step=0.1, group="lifecycle", label="w₂ — participant-entropy weight")
    w3: float = setting(0.25, "maturity weight of log(1 + token mass V)", minimum=0.0, maximum=5.0, step=0.05,
                        group="lifecycle", label="w₃ — token-mass weight")
    tau_maturity: float = setting(1.2, "τ_maturity: provisional → active when M ≥ τ", minimum=0.0, maximum=20.0,
                                  step=0.1, group="lifecycle", label="τ_maturity — maturity threshold")
    close_on_session_shift: bool = setting(True, "close joinable events when a new session starts",
                                           group="lifecycle")
    retention_sessions: int = setting(0, "archive closed events this many sessions old (0 = keep)", minimum=0,
                                      maximum=100, group="lifecycle")
    # steward policy Π_syn (§3.5.2)
    theta_s: float = setting(0.45, "θ_s: cosine margin of topic-track edges", minimum=0.0, maximum=1.0, step=0.05,
                             group="steward", label="θ_s — topic-link margin")
    k_sem: int = setting(3, "k_sem: topic-track breadth per event", minimum=0, maximum=20, group="steward",
                         label="k_sem — topic links per event")
    # event boundaries: the steward's coarse repair (fit on QMSum train by scripts/fit_boundaries.py)
    boundary_window: float = setting(1000.0, "words heard on each side of a gap when it is scored", minimum=10.0,
                                     maximum=20000.0, step=10.0, group="boundaries",
                                     label="boundary window (words each side)")
    boundary_mix: float = setting(1.0, "weight of what is said against who holds the floor in a gap's score",
                                  minimum=0.0, maximum=1.0, step=0.05, group="boundaries",
                                  label="content vs floor weight")
    boundary_smoothing: int = setting(9, "gaps in the moving average of the similarity curve", minimum=1,
                                      maximum=51, group="boundaries", label="smoothing (gaps)")
    boundary_threshold: float = setting(0.15, "least depth of a gap that ends an event", minimum=0.0, maximum=2.0,
                                        step=0.01, group="boundaries", label="depth threshold")
    boundary_min_size: float = setting(400.0, "least words between two event boundaries", minimum=0.0,
                                       maximum=50000.0, step=50.0, group="boundaries",
                                       label="least words between boundaries")
    boundary_lookahead: float = setting(300.0, "least words heard after a gap before the steward may cut it",
                                        minimum=0.0, maximum=50000.0, step=50.0, group="boundaries",
                                        label="words heard after a gap before a cut")
    relation_candidates: int = setting(10, "earlier events per target offered to relation synthesis", minimum=1,
                                       maximum=50, group="steward")
    relation_budget: int = setting(200, "B_u: most relations one steward run may propose", minimum=1,
                                   maximum=5000, group="steward", label="B_u — relation budget")
    theta_rel: float = setting(0.10, "gate on a relation's confidence, a calibrated probability (a chat's cause "
                               "model, a scenario's link model, the update model for a state succession; causes "
                               "are rare among the pairs, so true links score 0.1-0.6)", minimum=0.0, maximum=1.0,
                               step=0.05,
                               group="steward", label="θ_rel — relation gate")
    theta_repair: float = setting(0.5, "gate on a timeline repair's or boundary's confidence (0.5: the depth rule "
                                  "itself)", minimum=0.0, maximum=1.0,
                                  step=0.05, group="steward", label="θ_repair — repair gate")
    # retrieval (§3.7)
    lexical_weight: float = setting(0.5, "weight of z(BM25) fused with z(dense cosine)", minimum=0.0, maximum=5.0,
                                    step=0.1, group="retrieval")
    seeds: int = setting(6, "most seed events", minimum=1, maximum=50, group="retrieval")
    hops: int = setting(4, "most relation hops from a seed", minimum=0, maximum=6, group="retrieval")
    branching: int = setting(3, "most relations followed per event", minimum=1, maximum=20, group="retrieval")
    hop_cost: float = setting(0.6, "score an inherited rank loses per relation hop (z units)", minimum=0.0,
                              maximum=5.0, step=0.05, group="retrieval")
    chain_hop_cost: float = setting(0.15, "the same along the chain a why- or history-question asks for",
                                    minimum=0.0, maximum=5.0, step=0.05, group="retrieval")
    uncited_cost: float = setting(2.0, "what the one further record grounded from an event on the asked chain "
                                  "(one the relation does not cite) loses against the cited ones", minimum=0.0,
                                  maximum=10.0, step=0.1, group="retrieval")
    realtime_k: int = setting(16, "sentence records taken from the real-time buffer", minimum=0, maximum=100,
                              group="retrieval")
    final_k: int = setting(16, "sentence records returned", minimum=1, maximum=100, group="retrieval")
    max_evidence: int = setting(60, "most sentence records materialized before ranking", minimum=1, maximum=1000,
                                group="retrieval")
    ablations: list = setting(help="ablation switches", factory=list, choices=ABLATIONS, group="ablations")

    def __post_init__(self) -> None:
        self.check_ablations(ABLATIONS)

    def depth_rule(self) -> DepthRule:
        return DepthRule(self.boundary_window, self.boundary_mix, self.boundary_smoothing, self.boundary_threshold,
                         self.boundary_min_size, self.boundary_lookahead)
