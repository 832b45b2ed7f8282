"""Memory Workbench entry point: `streamlit run workbench/app.py`."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from workbench import access  # noqa: E402

FAVICON = ROOT / "workbench" / "static" / "favicon.svg"      # served by the app itself: no request leaves the machine
st.set_page_config(page_title="Memory Workbench", page_icon=str(FAVICON), layout="wide")

REPLAY = st.Page(str(ROOT / "pages" / "1_replay.py"), title="Replay", icon=":material/play_circle:",
                 url_path="replay-page", default=True)        # served at "/": a default page's own path is unused
PAGES = [
    REPLAY,
    st.Page(str(ROOT / "pages" / "2_memory_graph.py"), title="Memory graph", icon=":material/hub:", url_path="graph"),
    st.Page(str(ROOT / "pages" / "3_consolidation.py"), title="Consolidation", icon=":material/cleaning_services:", url_path="consolidation"),
    st.Page(str(ROOT / "pages" / "4_retrieval.py"), title="Retrieval", icon=":material/search:", url_path="retrieval"),
    st.Page(str(ROOT / "pages" / "5_annotate.py"), title="Annotate", icon=":material/label:", url_path="annotate"),
    st.Page(str(ROOT / "pages" / "6_benchmark.py"), title="Benchmark", icon=":material/leaderboard:", url_path="benchmark"),
]



def _replay_by_name() -> None:
    """`/replay` as a URL (Streamlit serves the default page only at "/"): the Replay page, with the link's
    session and turn."""
    st.switch_page(REPLAY, query_params=st.query_params.to_dict())


ALIASES = [st.Page(_replay_by_name, title="Replay", url_path="replay", visibility="hidden")]

signed_in = access.gate()            # beyond loopback: nobody sees a page before signing in
if signed_in is None:
    st.navigation(PAGES + ALIASES, position="hidden")         # keeps the page the URL asked for until after sign-in
    st.stop()
access.sidebar(signed_in)
st.navigation(PAGES + ALIASES).run()
