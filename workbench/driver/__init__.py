"""Start the workbench and drive it in headless Debian Chromium (Playwright).

Shared by `scripts/screenshots.py` and the real-browser tests, so both walk the app exactly as a person
would: through the sidebar, buttons and inputs. `server` starts the app, `browser` drives a page, `graph`
reads and clicks the memory graph's canvas, `demo` holds the data the tours walk and `tours` the walks
themselves. The names below are the package's public surface, so a test imports them from here.
"""
from workbench.driver.browser import (
    CHROMIUM,
    browser_page,
    choose_option,
    choose_radio,
    click,
    jump_to_turn,
    open_page,
    open_tab,
    start_long_jump,
    tall_screenshot,
    wait_idle,
    wait_loaded,
)
from workbench.driver.demo import (
    BENCH_FIXTURE,
    CAUSAL_QUESTION,
    LOCOMO,
    UPDATE_QUERY,
    bench_demo_workspace,
    bench_fixture_workspace,
    causal_root,
    demo_turn_after,
    first_miss,
    gam_session,
    locomo_conversation_file,
    routing_showcase_turn,
)
from workbench.driver.gam import gam_walkthrough
from workbench.driver.graph import (
    click_graph_node,
    folded_groups,
    graph_frame,
    graph_label_boxes,
    graph_nodes,
    overlapping_labels,
    redrawn_frame,
)
from workbench.driver.recmem import locomo_layers_walkthrough, recmem_walkthrough
from workbench.driver.server import ROOT, free_port, running_app, wait_until_up
from workbench.driver.tours import (
    ask_free_query,
    baseline_walkthrough,
    benchmark_walkthrough,
    decisions_walkthrough,
    locomo_events_walkthrough,
    locomo_graph_walkthrough,
    memloom_graph_walkthrough,
    memloom_walkthrough,
    open_largest_event,
    progress_walkthrough,
    walkthrough,
)

__all__ = [
    "BENCH_FIXTURE", "CAUSAL_QUESTION", "CHROMIUM", "LOCOMO", "ROOT", "UPDATE_QUERY", "ask_free_query",
    "baseline_walkthrough",
    "bench_demo_workspace", "bench_fixture_workspace", "benchmark_walkthrough", "browser_page", "causal_root",
    "decisions_walkthrough",
    "choose_option", "choose_radio", "click", "click_graph_node", "demo_turn_after", "first_miss", "folded_groups", "free_port",
    "gam_session", "gam_walkthrough",
    "graph_frame", "graph_label_boxes", "graph_nodes", "jump_to_turn", "locomo_conversation_file",
    "locomo_events_walkthrough", "locomo_graph_walkthrough", "locomo_layers_walkthrough", "memloom_graph_walkthrough", "memloom_walkthrough", "open_largest_event",
    "open_page", "open_tab", "overlapping_labels", "progress_walkthrough", "recmem_walkthrough", "redrawn_frame", "routing_showcase_turn",
    "running_app", "start_long_jump", "tall_screenshot", "wait_idle", "wait_loaded", "wait_until_up", "walkthrough",
]
