"""What an engine asks of its offline processes, as a protocol (the engine never imports the process base).

`engine.runtime.process.BaseProcess` implements it; the engine base class
types its processes by it, so the two modules import one way only.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from engine.core.proposal import Proposal
from engine.core.schema import ProcessSpec
from engine.runtime.reports import RunReport


@runtime_checkable
class OfflineProcess(Protocol):
    spec: ProcessSpec

    def pending(self) -> int: ...
    def propose(self, manual: bool = True) -> list[Proposal]: ...
    def preview(self, proposal_id: int) -> dict | None: ...
    def apply(self, decisions: dict[int, bool] | None, decided_by: str, run_id: str,
              defer_rest: bool = False) -> RunReport: ...
    def run(self) -> RunReport: ...
