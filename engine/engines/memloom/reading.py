"""How MemLoom reads a query before it retrieves: a why-question walks CAUSAL_FOLLOW back to causes (and
STATE_SUCCESSOR to earlier states), a history question STATE_SUCCESSOR back to earlier states, anything else is a
lookup. The reading keeps the words that
decided it, so the Retrieval page and `memwb bench` can show why a question did or did not walk a chain."""
from __future__ import annotations

import re
from dataclasses import dataclass

from engine.core.text import words

# What a why-question looks like however it is worded: an asked cause ("why", "what caused", "the reason", "the
# origin of"), a chain asked to be traced ("what led to", "how did … end up", "the story behind", "what set off"),
# or a cause put up for checking ("did X lead to Y", "was X the reason", "did X have an effect on Y", "how did X
# affect Y"). Matched on words with their clitics dropped ("why's" is "why"), so punctuation and word order
# around a cue do not matter. Effects asked forward ("what happened as a result of X", "what resulted from X",
# "what were the consequences of X") stay lookups: the chain walks back from what the question names. Not cues:
# "underlying" (a LoCoMo question asks for an underlying condition) and "the background of" (what a photo shows
# behind someone).
_CAUSE_WORDS = frozenset("""why caused causing reason reasons because led trigger triggered triggers
prompted forced explain explains explained explanation trace reconstruct origin origins
backstory contributed contributing sparked precipitated catalyst spurred provoked necessitated instigated
fueled fuelled""".split())
_CAUSE_PHRASES = re.compile(
    r"\bhow come\b|\bcauses? of\b|\b(?:did|does|do|could|would|might) \b.*\bcause\b"
    r"|\b(?:lead|leads|leading) (?:up )?to\b|\bdue to\b|\bresult(?:ed|s)? in\b|(?<!what )\bresult(?:ed|s)? from\b"
    r"|\bwhat made\b|\b(?:gave|give|gives|giving) rise to\b|\bbackground (?:to|behind)\b|\bwhose fault\b"
    r"|\bhad to happen\b"
    r"|\bwhat got\b|\bbrought (?:\w+ )?about\b|\b(?:come|came) about\b|\bhow did it happen\b"
    r"|\b(?:chain|sequence|series) of events\b|\banything to do with\b|\bresponsible for\b|\broot\b"
    r"|\b(?:what|who|which)(?:'s| is| was| were| are)? (?:\w+ ){0,3}behind\b"
    r"|\bhow (?:did|does|do|has|have|had|would|could) \b.*\b(?:end|ended|ending|ends) up\b"
    r"|\bhow (?:did|does|do|has|have|had) \b.*\b(?:come|came) to\b|\bwalk (?:me|us) through how\b"
    r"|\b(?:what|who) (?:started|set off|sets off|kicked off|set in motion|drove|pushed)\b|\bin motion\b"
    r"|\bhow (?:is|was) it that\b|\bwhat happened (?:that|to make|to cause)\b|\b(?:stem|stems|stemmed) from\b"
    r"|\b(?:down|owing) to\b|\bto blame\b|\bblamed? (?:on|for)\b|\bon account of\b|\bfor what reason\b"
    r"|\bset the stage\b|\bpaved the way\b|\bbrought on\b|\bwent wrong\b|\baccount for\b"
    r"|\bwhat (?:was|is) it that (?:made|caused|led|got|forced|prompted)\b"
    r"|\b(?:effect|impact|bearing) on\b|\b(?:effect|impact|bearing)\b.*\b(?:have|has|had) on\b|\bwhat ended up\b"
    r"|\b(?:how|in what way) (?:did|does|do|has|have|had|would|could|might) \b.*"
    r"\b(?:affect|affected|impact|impacted)\b")
# "consequence" asks for a cause when the question names the effect ("was the delay a consequence of the strike",
# "what was the delay a consequence of"), for effects when it names the cause.
_CONSEQUENCE = re.compile(r"\bconsequences?\b")
_CONSEQUENCE_FORWARD = re.compile(r"\b(?:what|which)(?:'s| is| was| were| are| have been)? (?:the |its |their )?"
                                  r"(?:\w+ )?consequences? of\b|\bas a consequence of\b"
                                  r"|\b(?:what|which) consequences? (?:did|does|do|has|have|had|will|would|could)\b")
_HISTORY_ASK = ("before", "used to", "originally", "previous", "changed", "change over", "history", "at first",
                "first", "over time", "until", "still", "anymore", "now")


@dataclass(frozen=True)
class QueryReading:
    """How a query was read: its intent (`cause`: why …, `history`: before / now / changed, or `lookup`) and
    the words that decided it (none for a lookup), so a researcher sees why a question did or did not walk a
    chain."""
    intent: str
    cue: str = ""

    def text(self) -> str:
        if self.intent == "cause":
            return (f"a why-question (“{self.cue}”): walks CAUSAL_FOLLOW back to causes (and STATE_SUCCESSOR "
                    "back to earlier states), each taking its effect's score less chain_hop_cost")
        if self.intent == "history":
            return f"a history question (“{self.cue}”): walks STATE_SUCCESSOR back to earlier states"
        return ("a lookup (no cue of a cause or of a history): every record ranks on its own relevance; a "
                "why-question is recognised by words such as why, what caused, what led to, the story behind")


def read_query(query: str) -> QueryReading:
    ws = words(query)
    low = " ".join(ws)
    cause = next((w for w in ws if w.split("'")[0] in _CAUSE_WORDS), None)
    phrase = _CAUSE_PHRASES.search(low) or (None if _CONSEQUENCE_FORWARD.search(low) else _CONSEQUENCE.search(low))
    if cause or phrase:
        return QueryReading("cause", cause or phrase.group(0))
    history = next((cue for cue in _HISTORY_ASK if f" {cue} " in f" {low} "), None)
    if history:
        return QueryReading("history", history)
    return QueryReading("lookup")
