"""How likely one utterance continues the story of an earlier one: the steward's logic-track hook.

A causal or state chain in conversation moves from turn to turn through
shared things: the same rare words, a name or code, the person one turn is
said by and the next one mentions, a change of state on the earlier side, a
cue such as "because" on the later side, and closeness in meaning and in
sessions. A cause is news, not a reaction to it: the earlier side's substance
(how many content words it says) tells a report ("the compressor on the big
minus-eighty gave out") from the short replies that echo its words ("Do you at
least still have the plasmids?"), which a causal suite's distractors and real
conversations are full of. It counts up to `SUBSTANCE_CAP` content words: past
a sentence's worth, a longer turn is not more of a cause. `LinkScorer` turns
those signals into one logistic score per sentence pair, vectorised over every
(later, earlier) pair of a conversation. The weights were fit by `scripts/fit_links.py` on the
validation split of the team's causal suite only (consecutive turns of gold
chains as positives, every other earlier turn as negatives); the script
prints how often the true predecessor ranks first on every split (the train split, written
later by other authors, is where these weights meet scenarios they were not fit on).
"""
from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy import sparse

from engine.core.text import STOPWORDS, content_tokens, words

if TYPE_CHECKING:
    from engine.core.node import Node

FEATURES = ("cosine", "lexical", "entities", "mention", "same_speaker", "cue", "change", "session_gap", "substance")
WEIGHTS = np.array([2.370, 0.334, 0.778, 0.866, 0.379, -0.004, 0.157, -0.883, 3.381])
BIAS = -11.109
LEXICAL_CAP = 15.0
SUBSTANCE_CAP = 10        # content words past which a turn is no more substantive (chosen on validation)
# Cost bounds of the steward's candidate search. A target is scored against the LINK_POOL most recent
# earlier utterances only (a LoCoMo conversation has under 1,000 turns, so there it sees them all; the
# session-gap weight already discounts older ones), and LINK_ROWS of its own utterances at a time, so
# one target costs O(its utterances x LINK_POOL) time and O(LINK_ROWS x LINK_POOL) memory however long
# the conversation is.
LINK_POOL = 4096
LINK_ROWS = 256

CAUSE_CUES = ("because", "since", "due to", "after", "now that", "ever since", "as a result", "that's why",
              "which is why", "thanks to", "owing to", "caused", "led to", "so i", "so we", "so now", "ended up",
              "couldn't", "had to", "forced")
CHANGE_WORDS = frozenset("""sold moved move moving quit left leave leaving lost lose fired hired broke broken
cancelled canceled closed closing stopped started start starting injured hurt sick ill diagnosed
promoted transferred switched replaced replacing cut cuts raised dropped failed failing
passed passing died born married divorced retired evicted flooded crashed delayed postponed
approved rejected denied won bought renting rented shut banned merged split changed
changing new""".split())
_NAME = re.compile(r"\b[A-Z][a-z]{2,}\b")
_CODE = re.compile(r"\b[A-Za-z]*\d{3,}[A-Za-z]*\b")


@functools.lru_cache(maxsize=65536)
def cue_of(text: str) -> str:
    low = " " + " ".join(words(text)) + " "
    return next((c for c in CAUSE_CUES if f" {c} " in low), "")


@functools.lru_cache(maxsize=65536)
def has_change(text: str) -> bool:
    """Cached: MemLoom's grounding asks it of every record of every reached event, query after query."""
    return bool(set(words(text)) & CHANGE_WORDS)


def names_and_codes(text: str) -> set[str]:
    """The names (capitalised words not at the start of a stopword) and codes ("B-204", "2019") a text holds."""
    return ({m.lower() for m in _NAME.findall(text) if m.lower() not in STOPWORDS}
            | {c.lower() for c in _CODE.findall(text)})


def substance(text: str, cap: int = SUBSTANCE_CAP) -> float:
    """How much a turn says: log(1 + its content words, at most `cap`)."""
    return math.log1p(min(len(content_tokens(text)), cap))


def pair_signals(old_text: str, old_speaker: str, new_text: str, new_speaker: str) -> dict[str, float]:
    """The link scorer's signals of one pair that need no other utterance of the conversation (the lexical
    overlap's idf and the session gap do): for a decision model reading a pair on its own."""
    old_names, new_names = names_and_codes(old_text), names_and_codes(new_text)
    return {"entities": float(len(old_names & new_names)),
            "mention": float(old_speaker.lower() in new_names or new_speaker.lower() in old_names),
            "same_speaker": float(old_speaker.lower() == new_speaker.lower()), "cue": float(bool(cue_of(new_text))),
            "change": float(has_change(old_text)), "substance": substance(old_text)}


@dataclass
class Utterance:
    id: int
    speaker: str
    text: str
    session: int          # position of its session in the conversation


class LinkScorer:
    """Pair scores over one conversation's utterances; idf is taken over those utterances.

    Words and entities are sparse indicator matrices: their size grows with the words actually used, not
    with utterances x vocabulary (super-linear: the vocabulary grows with the conversation too).
    """

    def __init__(self, utterances: list[Utterance], vectors: np.ndarray, substance_cap: int = SUBSTANCE_CAP):
        self.items = utterances
        self.pos = {u.id: i for i, u in enumerate(utterances)}
        self.vectors = vectors
        toks = [{t for t in content_tokens(u.text) if len(t) > 3 and not t.isdigit()} for u in utterances]
        ents = [names_and_codes(u.text) for u in utterances]
        n = len(utterances)
        df = Counter(t for s in toks for t in s)
        vocab = {t: i for i, t in enumerate(sorted(df))}
        self.idf = np.array([math.log((n + 1) / (df[t] + 0.5)) for t in sorted(df)])
        self.tokens = _binary(toks, vocab)
        evocab = {e: i for i, e in enumerate(sorted({e for s in ents for e in s}))}
        self.entities = _binary(ents, evocab)
        speakers = sorted({u.speaker.lower() for u in utterances})
        self.speaker_id = np.array([speakers.index(u.speaker.lower()) for u in utterances])
        self.mentions = np.zeros((n, len(speakers)))           # utterance i mentions speaker s by name
        for i, s in enumerate(ents):
            for j, sp in enumerate(speakers):
                self.mentions[i, j] = sp in s
        self.cue = np.array([bool(cue_of(u.text)) for u in utterances], dtype=float)
        self.change = np.array([has_change(u.text) for u in utterances], dtype=float)
        self.session = np.array([u.session for u in utterances], dtype=float)
        self.substance = np.array([substance(u.text, substance_cap) for u in utterances])
        self.token_sets, self.entity_sets = toks, ents

    def features(self, later: list[int], earlier: list[int]) -> np.ndarray:
        """(len(later), len(earlier), len(FEATURES)) for utterance ids."""
        L = np.array([self.pos[i] for i in later])
        E = np.array([self.pos[i] for i in earlier])
        cos = self.vectors[L] @ self.vectors[E].T
        lex = np.minimum((self.tokens[L].multiply(self.idf[None, :]) @ self.tokens[E].T).toarray(), LEXICAL_CAP)
        ent = (self.entities[L] @ self.entities[E].T).toarray()
        sp_l, sp_e = self.speaker_id[L], self.speaker_id[E]
        mention = np.maximum(self.mentions[L][:, sp_e], self.mentions[E][:, sp_l].T)
        same = (sp_l[:, None] == sp_e[None, :]).astype(float)
        cue = np.repeat(self.cue[L][:, None], len(E), axis=1)
        change = np.repeat(self.change[E][None, :], len(L), axis=0)
        gap = np.log1p(np.maximum(self.session[L][:, None] - self.session[E][None, :], 0))
        substance = np.repeat(self.substance[E][None, :], len(L), axis=0)
        return np.stack([cos, lex, ent, mention, same, cue, change, gap, substance], axis=-1)

    def logits(self, later: list[int], earlier: list[int]) -> np.ndarray:
        """(len(later), len(earlier)) logits, computed `LINK_ROWS` later utterances at a time."""
        if not later or not earlier:
            return np.zeros((len(later), len(earlier)))
        return np.vstack([self.features(later[i:i + LINK_ROWS], earlier) @ WEIGHTS + BIAS
                          for i in range(0, len(later), LINK_ROWS)])

    def shared(self, a: int, b: int) -> list[str]:
        """The words and entities two utterances share (the hooks shown to a reviewer)."""
        i, j = self.pos[a], self.pos[b]
        return sorted((self.token_sets[i] & self.token_sets[j]) | (self.entity_sets[i] & self.entity_sets[j]))


def probability(logit: float) -> float:
    return 1.0 / (1.0 + math.exp(-logit))


def strongest_links_of_each(scorer: LinkScorer, later: list[int], earlier: Sequence["Node"],
                            window: int = LINK_POOL) -> list[dict[int, tuple[float, int, int]]]:
    """For each of the `later` utterances, each earlier group's (event's) strongest link to it: group id ->
    (logit, the group's utterance, the later utterance), the first maximum in time order.

    Only the last `window` utterances of `earlier` (groups in time order) are scored, so a target's
    candidates cost O(len(later) x window) whatever the conversation's length; groups wholly before the
    window are not candidates. One logit matrix, its per-group maxima taken row by row in numpy.
    """
    groups, pool, starts = _pool(earlier, window)
    if not later or not groups:
        return [{} for _ in later]
    logits = scorer.logits(later, pool)
    sizes = [len(members) for _, members in groups]
    group_max = np.maximum.reduceat(logits, starts, axis=1)
    at_max = logits == np.repeat(group_max, sizes, axis=1)
    first = np.minimum.reduceat(np.where(at_max, np.arange(len(pool)), len(pool)), starts, axis=1)
    return [{gid: (float(group_max[r, g]), pool[int(first[r, g])], u) for g, (gid, _) in enumerate(groups)}
            for r, u in enumerate(later)]


def _pool(earlier: Sequence["Node"], window: int) -> tuple[list[tuple[int, list[int]]], list[int], np.ndarray]:
    """The groups (id, members) whose utterances fall in the last `window` of `earlier`, those utterances in
    order, and where each group's start in them."""
    groups: list[tuple[int, list[int]]] = []
    size = 0
    for e in reversed(earlier):
        if size >= window:
            break
        members = list(e.members)[-(window - size):]
        groups.append((e.id, members))
        size += len(members)
    groups.reverse()
    pool = [m for _, members in groups for m in members]
    return groups, pool, np.cumsum([0] + [len(members) for _, members in groups[:-1]])


def _binary(sets: list[set], vocab: dict) -> sparse.csr_matrix:
    rows = [i for i, s in enumerate(sets) for _ in s]
    cols = [vocab[t] for s in sets for t in s]
    return sparse.csr_matrix((np.ones(len(cols)), (rows, cols)), shape=(len(sets), len(vocab)))
