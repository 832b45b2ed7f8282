"""The Replay page's parts: the transcript, what a turn caused (effects, phases, turn effects), the settings form, the session picker and a long jump's progress."""
