"""Memory Workbench entry point: `streamlit run workbench/app.py`."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

st.set_page_config(page_title="Memory Workbench", page_icon="🧠", layout="wide")

PAGES = [
    st.Page(str(ROOT / "pages" / "1_replay.py"), title="Replay", icon="▶️", default=True),
    st.Page(str(ROOT / "pages" / "2_memory_graph.py"), title="Memory graph", icon="🕸️"),
    st.Page(str(ROOT / "pages" / "3_consolidation.py"), title="Consolidation", icon="🧹"),
    st.Page(str(ROOT / "pages" / "4_retrieval.py"), title="Retrieval", icon="🔎"),
    st.Page(str(ROOT / "pages" / "5_annotate.py"), title="Annotate", icon="🏷️"),
]

st.navigation(PAGES).run()
