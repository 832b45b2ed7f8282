"""RecMem parameters (§3.6 defaults and presets) and its ablation switches (§4.3)."""
from __future__ import annotations

from dataclasses import dataclass

from engine.engines.recmem.schema import ABLATIONS
from engine.core.schema import EngineSettings, setting

# The paper's recommendations (§3.6): (θ_sim, θ_count), with merge-first at θ_sim (Eq. 6).
PRESETS = {"locomo": (0.7, 5), "longmemeval": (0.6, 4)}
CUSTOM = "custom"
PRESET_CHOICES = {"locomo": "θ_sim 0.7, θ_count 5: casual open-ended conversation (LoCoMo)",
                  "longmemeval": "θ_sim 0.6, θ_count 4: longer, task-oriented interaction (LongMemEval-S)",
                  CUSTOM: "θ_sim, θ_count and θ_merge as set"}
GATE_FIELDS = ("theta_sim", "theta_count", "theta_merge")


@dataclass
class RecMemSettings(EngineSettings):
    # the recurrence gate (§3.2) and merge-first (§3.3)
    preset: str = setting(CUSTOM, "a named preset sets θ_sim, θ_count and θ_merge together (§3.6): locomo "
                          "0.7 / 5, longmemeval 0.6 / 4 (θ_merge = θ_sim); custom keeps the values set",
                          choices=tuple(PRESET_CHOICES), group="recurrence gate")
    theta_sim: float = setting(0.7, "θ_sim: a subconscious neighbour is relevant at cosine ≥ θ_sim (Eq. 5)",
                               minimum=0.0, maximum=1.0, step=0.05, group="recurrence gate")
    theta_count: int = setting(5, "θ_count: consolidate when this many units, the new one included, pass θ_sim",
                               minimum=1, maximum=50, group="recurrence gate")
    theta_merge: float = setting(0.7, "θ_merge: merge-first when the nearest episode has cosine ≥ θ_merge with "
                                 "the new unit (the paper's Eq. 6 uses θ_sim)", minimum=0.0, maximum=1.0,
                                 step=0.05, group="recurrence gate")
    gate_k_factor: int = setting(2, "the gate retrieves the nearest factor × θ_count subconscious units "
                                 "(N_i, the new one included) before filtering by θ_sim", minimum=1, maximum=10,
                                 group="recurrence gate", advanced=True)
    # the consolidation process (§3.3-3.4)
    theta_accept: float = setting(0.0, "gate θ on a proposal's confidence (a cluster's coherence, a merge's "
                                  "cosine); 0 consolidates every trigger, as the paper does", minimum=0.0,
                                  maximum=1.0, step=0.05, group="consolidation")
    k_known: int = setting(10, "k: known facts retrieved by the episode's embedding for fact maintenance "
                           "(Eq. 8, TopK_k(S_sem, Φ(E)))", minimum=0, maximum=50, group="consolidation")
    # retrieval (§3.5)
    k_sub: int = setting(10, "k_sub: subconscious units retrieved", minimum=0, maximum=100, group="retrieval")
    k_epi: int = setting(5, "k_epi: episodes retrieved", minimum=0, maximum=100, group="retrieval")
    k_sem: int = setting(10, "k_sem: facts retrieved (the paper couples k_sem = 2 · k_epi)", minimum=0,
                         maximum=100, group="retrieval")
    lexical_weight: float = setting(0.5, "weight of z(BM25) fused with z(dense cosine) in every layer",
                                    minimum=0.0, maximum=5.0, step=0.1, group="retrieval")
    ablations: list = setting(help="ablation switches", factory=list, choices=ABLATIONS, group="ablations")

    def __post_init__(self) -> None:
        self.check_ablations(ABLATIONS)
        if self.preset == CUSTOM:
            return
        if self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; choose one of {', '.join(PRESET_CHOICES)}")
        sim, count = PRESETS[self.preset]
        wanted = (sim, count, sim)
        given = tuple(getattr(self, f) for f in GATE_FIELDS)
        defaults = tuple(type(self).__dataclass_fields__[f].default for f in GATE_FIELDS)
        if given not in (defaults, wanted):
            clash = ", ".join(f"{f}={v}" for f, v, d in zip(GATE_FIELDS, given, defaults) if v != d)
            raise ValueError(f"preset {self.preset} sets theta_sim={sim}, theta_count={count}, theta_merge={sim}, "
                             f"which conflicts with {clash}; use preset=custom to set them yourself")
        self.theta_sim, self.theta_count, self.theta_merge = wanted

    @property
    def gate_k(self) -> int:
        """|N_i|: how many subconscious units (the new one included) the gate looks at."""
        return self.gate_k_factor * self.theta_count
