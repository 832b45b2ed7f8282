"""Who may do what in the workbench: roles, the actions they allow, the signed-in identity, the bind rule.

Three roles. A viewer browses every session, replays into a session of their own (a
private branch when the session belongs to someone else) and asks queries; an
annotator may also label cases and decisions (their own labels, next to other
annotators'); a reviewer may also decide proposals, apply and undo runs, edit
the gold of cases, adjudicate annotators' labels and run benchmarks. The identity that did something is what the log and the annotation
tables record, so it comes from sign-in (or, on a loopback-only server nobody
else can reach, from the operating-system user), never from a text box.

Plain Python: the workbench's sign-in screen (`workbench.access`) and the
`memwb ui` / `memwb auth` commands build on it.
"""
from __future__ import annotations

import getpass
import ipaddress
from dataclasses import dataclass
from enum import Enum

from engine.core.errors import WorkbenchError

LOOPBACK = "127.0.0.1"          # where `memwb ui` listens unless told otherwise
SIGN_IN_ENV = "MEMWB_SIGN_IN"   # "1": ask for sign-in even on loopback (`memwb ui --sign-in`, a reverse proxy)


class Action(str, Enum):
    """What a page can do on behalf of someone; each page checks the one it is about to do."""

    BROWSE = "browse"                   # read sessions, graphs, audit logs, benchmark results
    REPLAY = "replay"                   # load a conversation and step it into a session of one's own
    QUERY = "query"                     # retrieval, peers, scoring against annotations
    REVIEW = "review"                   # run a diagnosis, preview plans, decide and apply proposals, defer
    UNDO = "undo"                       # undo a committed run
    ANNOTATE = "annotate"               # create, edit, import and delete annotation cases (their gold)
    LABEL = "label"                     # one's own labels of a case's questions, and decision labels
    ADJUDICATE = "adjudicate"           # open adjudication and merge annotators' labels into the gold
    BENCHMARK = "benchmark"             # run a benchmark (CPU for minutes, writes under the workspace)
    WRITE_SHARED = "write-shared"       # ingest into a session someone else owns

    @property
    def phrase(self) -> str:
        return _PHRASES[self]


_PHRASES = {Action.BROWSE: "browsing", Action.REPLAY: "replaying", Action.QUERY: "querying",
            Action.REVIEW: "deciding and applying proposals", Action.UNDO: "undoing a run",
            Action.ANNOTATE: "annotating", Action.LABEL: "labelling",
            Action.ADJUDICATE: "adjudicating labels", Action.BENCHMARK: "running a benchmark",
            Action.WRITE_SHARED: "writing into another person's session"}


class Role(str, Enum):
    VIEWER = "viewer"
    ANNOTATOR = "annotator"
    REVIEWER = "reviewer"

    def allows(self, action: Action) -> bool:
        return action in GRANTS[self]


GRANTS = {Role.VIEWER: frozenset({Action.BROWSE, Action.REPLAY, Action.QUERY}),
          Role.ANNOTATOR: frozenset({Action.BROWSE, Action.REPLAY, Action.QUERY, Action.LABEL}),
          Role.REVIEWER: frozenset(Action)}


class AccessDenied(WorkbenchError, PermissionError):
    """The signed-in identity's role does not allow the action; the message says which role would."""


@dataclass(frozen=True)
class Identity:
    """Someone signed in (or the local user): the name recorded with what they do, their role, and how they
    signed in ("local", "token" or "oidc"). `stamp` ties a token sign-in to the credential it used, so rotating
    or removing the user signs that browser session out."""

    name: str
    role: Role
    via: str
    stamp: str = ""

    def can(self, action: Action) -> bool:
        return self.role.allows(action)

    def require(self, action: Action) -> None:
        """Raise `AccessDenied` unless this identity may do `action`."""
        if not self.can(action):
            roles = [r.value for r in Role if r.allows(action)]
            raise AccessDenied(f"{self.name} is signed in as a {self.role.value}: {action.phrase} needs the "
                               f"{' or '.join(roles)} role (`memwb auth role {self.name} {roles[0]}`). "
                               "Nothing was changed.")

    @property
    def label(self) -> str:
        return f"{self.name} ({self.role.value})"


def local_identity() -> Identity:
    """The person at the keyboard of a loopback-only workbench: the operating-system user, as a reviewer."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):           # no passwd entry (a container's arbitrary uid)
        user = "unknown"
    return Identity(f"local:{user}", Role.REVIEWER, "local")


def is_loopback(address: str | None) -> bool:
    """Whether a server bound to `address` is reachable from this machine only. An unset address means every
    interface (Streamlit's default), so it is not."""
    if not address:
        return False
    if address.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip().strip("[]")).is_loopback
    except ValueError:                    # a host name: it may resolve to anything
        return False


def sign_in_required(address: str | None, forced: bool = False) -> bool:
    """Sign-in is asked for whenever the server listens beyond loopback, or when the operator forces it."""
    return forced or not is_loopback(address)


__all__ = ["LOOPBACK", "SIGN_IN_ENV", "AccessDenied", "Action", "GRANTS", "Identity", "Role", "is_loopback",
           "local_identity", "sign_in_required"]
