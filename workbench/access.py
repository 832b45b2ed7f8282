"""Sign-in, the signed-in identity and role checks for the pages (Streamlit glue over `engine.core.access`).

On a server bound to loopback only (what `memwb ui` does by default) nobody else
can reach the pages, so the person using them is the operating-system user,
`local:<user>`, with the reviewer role. Bound beyond loopback (or started with
`--sign-in`), every page first asks for sign-in: with the identity provider of
Streamlit's secrets (`st.login`, `st.user`) or with a name and a token from
`memwb auth` (checked against the users file's scrypt hash, never kept).

Pages ask `require(action)` in the callback that does the action, so a viewer's
session cannot apply, undo, decide or annotate by sending a crafted widget
event either: the identity lives in session state under a key no widget has,
as an `Identity` object a browser cannot forge, and a token identity is checked
against the users file again on every use (a removed user or a rotated token
signs that session out; a changed role applies at once).
"""
from __future__ import annotations

import os

import streamlit as st
from streamlit import config

from engine.core.access import (SIGN_IN_ENV, AccessDenied, Action, Identity, Role, local_identity,
                                sign_in_required)
from engine.store.data_paths import DATA_DIRS_ENV, data_dirs
from engine.core.redact import redact, secret_status
from engine.store.users import SignInThrottle, UserBook, UserBookError
from engine.store.workspace import workspace_dir
from workbench.text import md_code, md_escape

_IDENTITY = "_memwb_identity"            # set only here; no widget has this key
_NAME, _SECRET, _ERROR = "signin_name", "signin_secret", "signin_error"


def sign_in_needed() -> bool:
    return sign_in_required(config.get_option("server.address"), os.environ.get(SIGN_IN_ENV) == "1")


def oidc_configured() -> bool:
    """Whether Streamlit's secrets hold an identity provider ([auth])."""
    try:
        return "auth" in st.secrets
    except Exception:                     # no secrets file at all  # noqa: BLE001
        return False


@st.cache_resource
def _throttle() -> SignInThrottle:
    """Failed sign-ins per name, shared by every browser session of this server."""
    return SignInThrottle()


def current_identity() -> Identity | None:
    """Who is using this browser session now; None while nobody is signed in."""
    if not sign_in_needed():
        return local_identity()
    if oidc_configured() and st.user.is_logged_in:
        return UserBook().oidc_identity(st.user.get("email"))
    held = st.session_state.get(_IDENTITY)
    if not isinstance(held, Identity) or held.via != "token":
        return None
    fresh = UserBook().current(held)
    if fresh is None:
        st.session_state.pop(_IDENTITY, None)
        st.session_state[_ERROR] = "Your token was rotated or your user removed: sign in again."
    elif fresh != held:
        st.session_state[_IDENTITY] = fresh
    return fresh


def require(action: Action) -> Identity:
    """The identity, if it may do `action`; `AccessDenied` otherwise (call it where the action is done)."""
    identity = current_identity()
    if identity is None:
        raise AccessDenied(f"sign in first: {action.phrase} needs a signed-in user. Nothing was changed.")
    identity.require(action)
    return identity


def can(action: Action) -> bool:
    identity = current_identity()
    return identity is not None and identity.can(action)


def who() -> str:
    """The name recorded with a decision or an annotation: the signed-in identity's."""
    identity = current_identity()
    if identity is None:
        raise AccessDenied("sign in first: nothing is recorded for nobody")
    return identity.name


def read_only_note(action: Action, what: str) -> None:
    """Say once, at the top of a page, why its controls are disabled for this identity."""
    identity = current_identity()
    if identity is not None and not identity.can(action):
        roles = " or ".join(r.value for r in Role if r.allows(action))
        st.info(f"Signed in as {md_escape(identity.label)}: you can read {what}; {action.phrase} needs the "
                f"{roles} role.", icon=":material/visibility:")


# -- the sign-in screen --------------------------------------------------------------------------------------
def _sign_in_with_token() -> None:
    """Form callback: check the name and secret, then forget the secret whatever the outcome."""
    name = (st.session_state.get(_NAME) or "").strip()
    secret = st.session_state.get(_SECRET) or ""
    st.session_state[_SECRET] = ""
    throttle = _throttle()
    wait = throttle.wait(name)
    if wait:
        st.session_state[_ERROR] = f"Too many failed sign-ins for this name: try again in {wait:.0f} s."
        return
    try:
        identity = UserBook().verify(name, secret)
    except UserBookError as exc:
        st.session_state[_ERROR] = f"Sign-in is not available: {exc}"
        return
    if identity is None:
        throttle.failed(name)
        st.session_state[_ERROR] = "Unknown name or wrong token."
        return
    throttle.succeeded(name)
    st.session_state[_IDENTITY] = identity
    st.session_state.pop(_ERROR, None)


def sign_in_screen() -> None:
    st.title("Memory Workbench")
    st.markdown("This workbench is shared: **sign in** to open it.")
    if oidc_configured():
        if st.user.is_logged_in:       # signed in at the provider, but the users file gives this address no role
            st.error(f"{md_escape(st.user.get('email') or 'This account')} has no role in this workbench. The "
                     f"operator can add it: `memwb auth add {st.user.get('email') or 'ADDRESS'} --role viewer "
                     "--oidc`.", icon=":material/block:")
            st.button("Sign out", key="signin_oidc_logout", on_click=st.logout)
        else:
            st.button("Sign in with the identity provider", key="signin_oidc", type="primary", on_click=st.login,
                      icon=":material/login:")
    with st.form("signin_form", border=True):
        st.text_input("User name", key=_NAME, autocomplete="username")
        st.text_input("Token or password", key=_SECRET, type="password", autocomplete="current-password")
        st.form_submit_button("Sign in", type="primary", on_click=_sign_in_with_token)
    if st.session_state.get(_ERROR):
        st.error(md_escape(st.session_state[_ERROR]), icon=":material/error:")
    st.caption("The operator creates users and tokens with `memwb auth add NAME --role viewer|reviewer`.")


def sign_out() -> None:
    """Forget the identity and everything this browser session held (another person may sign in next)."""
    oidc = oidc_configured() and st.user.is_logged_in
    st.session_state.clear()
    if oidc:
        st.logout()


def gate() -> Identity | None:
    """The identity, or None after drawing the sign-in screen (the caller stops the page then)."""
    identity = current_identity()
    if identity is None:
        sign_in_screen()
    return identity


# -- the sidebar: who, and the settings that matter for access --------------------------------------------
def sidebar(identity: Identity) -> None:
    with st.sidebar:
        st.caption(f"**{md_escape(identity.name)}** · {identity.role.value}"
                   + ("" if identity.via == "local" else f" · signed in by {identity.via}"))
        if identity.via != "local":
            st.button("Sign out", key="signout", on_click=sign_out, icon=":material/logout:")
        with st.expander("Settings", icon=":material/settings:"):
            settings_panel(identity)


def settings_panel(identity: Identity) -> None:
    """What this server runs with. Secrets show only whether they are set, never their value."""
    address = config.get_option("server.address") or "every interface"
    st.markdown(f"**Listening on** {md_code(address)} · sign-in "
                f"{'required' if sign_in_needed() else 'not required (loopback only)'}")
    st.markdown(f"**Workspace** {md_code(workspace_dir())}")
    st.markdown("**Data folders** (path boxes open files only here; add with "
                f"{md_code(DATA_DIRS_ENV)})  \n" + "  \n".join(md_code(d) for d in data_dirs()))
    model = os.environ.get("MEMWB_OPENAI_MODEL") or "default"
    base = os.environ.get("MEMWB_OPENAI_BASE_URL") or os.environ.get("OPENAI_BASE_URL") or "default endpoint"
    st.markdown(f"**OpenAI-compatible LLM** · model {md_code(model)} · {md_code(redact(base))}")
    st.markdown("**Secrets**  \n" + "  \n".join(f"{md_code(name)} · {'set' if is_set else 'not set'}"
                                                for name, is_set in secret_status().items()))


# -- a viewer's replay goes into a session of their own ----------------------------------------------------------
def own_session_before_ingest(wb) -> str | None:
    """Call before stepping ingests turns: a viewer writing into a session they do not own goes on in a private
    branch of their own (the session stays as it was); returns a note saying so, or None when nothing moved.
    Raises `AccessDenied` for anyone who may not replay."""
    identity = require(Action.REPLAY)
    owner = wb.owner
    if identity.can(Action.WRITE_SHARED) or owner == identity.name:
        return None
    before = wb.session_name or wb.db_path.name
    wb.fork(identity.name)
    return (f"{before} belongs to {owner or 'the workspace'}, and a viewer does not write into it: your replay "
            f"goes on in your private branch {wb.session_name or wb.db_path.name} (its log so far copied).")
