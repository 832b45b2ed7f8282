"""One error root: every error the library and the workbench raise on purpose is a `WorkbenchError`, which the
boundaries (the Consolidation page's actions) catch alone, so a bug still surfaces as a bug."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from engine.core.errors import WorkbenchError
from engine.runtime.errors import RunError
from workbench.review import actions as consolidation_actions

SIGNALS = {"engine.engines.allmem.executor.PlanInvalid", "engine.engines.recmem.consolidation.PlanFailed",
           "workbench.model.JumpCancelled"}        # raised and caught inside one module: never reach a boundary


def defined_errors() -> dict[str, type]:
    """Every exception class defined in a module of engine/ or workbench/, by its dotted name."""
    found = {}
    for package in ("engine", "workbench"):
        for info in pkgutil.walk_packages(importlib.import_module(package).__path__, f"{package}."):
            if info.name.endswith("__main__"):             # `python -m engine.cli` runs the command line
                continue
            module = importlib.import_module(info.name)
            for name, obj in vars(module).items():
                if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == info.name:
                    found[f"{info.name}.{name}"] = obj
    return found


def test_every_deliberate_error_derives_from_the_root():
    errors = defined_errors()
    assert SIGNALS <= set(errors)
    outside = sorted(name for name, cls in errors.items() if not issubclass(cls, WorkbenchError))
    assert outside == sorted(SIGNALS), "derive these from engine.core.errors.WorkbenchError: " \
                                       f"{sorted(set(outside) - SIGNALS)}"


class _Workbench:
    def ensure_head(self) -> None:
        pass

    def reload(self) -> None:
        self.reloaded = True


@pytest.fixture
def wb(monkeypatch) -> _Workbench:
    monkeypatch.setattr(consolidation_actions.access, "require", lambda need: None)
    consolidation_actions.st.session_state.pop(consolidation_actions.FLASH, None)
    return _Workbench()


def test_an_action_refused_on_purpose_is_a_message(wb):
    def act():
        raise RunError("no open run: propose first")
    consolidation_actions.edit(wb, act)
    assert consolidation_actions.st.session_state[consolidation_actions.FLASH] == ("error",
                                                                                    "no open run: propose first")
    assert wb.reloaded


def test_a_bug_in_an_action_is_not_swallowed(wb):
    def act():
        raise ValueError("a bug")
    with pytest.raises(ValueError, match="a bug"):
        consolidation_actions.edit(wb, act)
    assert consolidation_actions.FLASH not in consolidation_actions.st.session_state
    assert wb.reloaded
