"""Speaker-anchored pronouns written in the third person with agreement, for the offline router.

"I get tired" becomes "Maya gets tired", "Are you signed up?" becomes "Is Jon signed up?", "I haven't"
becomes "Jon hasn't": the pronoun takes the speaker's (or addressee's) name and the verb it governs takes
the third-person singular. Rules over a closed word list, no tagger: a first-person "I" is always a subject;
a "you" is a subject when an auxiliary is inverted before it or when a verb follows it and no verb or
preposition governs it. What the rules cannot read (an unknown word after "you") stays as written.
"""
from __future__ import annotations

import re
from typing import Iterable

TOKEN = re.compile(r"[A-Za-z][A-Za-z'’]*|[^A-Za-z]+")

# Possessive and object forms need no verb; the subject forms are handled by `_subject`.
_FIRST_OTHER = {"me": "{n}", "my": "{n}'s", "mine": "{n}'s", "myself": "{n}"}
_SECOND_OTHER = {"your": "{n}'s", "yours": "{n}'s", "yourself": "{n}"}
# Contracted subject + verb: the verb part in the third person.
_CONTRACTED = {"i'm": "is", "i've": "has", "i'll": "will", "you're": "is", "you've": "has", "you'll": "will"}
_WOULD_OR_HAD = {"i'd", "you'd"}

# The verbs whose third-person form is irregular (or which must not change).
_THIRD = {"am": "is", "are": "is", "were": "was", "have": "has", "do": "does", "go": "goes",
          "don't": "doesn't", "haven't": "hasn't", "aren't": "isn't", "weren't": "wasn't",
          "dont": "doesn't", "havent": "hasn't", "arent": "isn't", "werent": "wasn't"}
_MODALS = {"can", "could", "will", "would", "shall", "should", "may", "might", "must", "can't", "cannot",
           "couldn't", "won't", "wouldn't", "shouldn't", "mustn't", "didn't", "wasn't", "was", "had",
           "hadn't", "did", "is", "isn't", "has", "hasn't", "does", "doesn't", "ain't", "used", "been",
           "gotta", "wanna", "gonna", "be"}
# Past and present alike: left as written rather than guessed.
_AMBIGUOUS = {"read", "put", "set", "cut", "hit", "let", "quit", "hurt", "cast", "cost", "shut", "spread", "bet",
              "fit", "beat", "burst", "split"}
_PAST = set("""went got made saw said came took gave found knew thought told felt left kept brought bought
began ran wrote met sent spent built heard held lost paid sat stood understood won wore woke drove ate drank
flew fell forgot grew hung led lent meant rode rose sang slept spoke taught threw caught chose broke became
swam fought sold shot struck stuck drew dug fed forgave froze hid bent bit blew bled bound dealt fled flung
ground knelt laid lay lit overcame rang sank shook shone slid spun sprang stole strove swept swore swung
tore undertook upset wept wound withdrew learnt dreamt burnt spelt spilt retook overtook mistook""".split())
# Words that may stand between a subject and its verb.
_ADVERBS = {"just", "really", "also", "always", "never", "still", "usually", "actually", "totally", "definitely",
            "often", "sometimes", "even", "finally", "recently", "already", "only", "kinda", "sorta", "truly",
            "absolutely", "honestly", "certainly", "probably", "seriously", "literally", "especially",
            "generally", "mostly", "personally", "too", "all", "both", "somehow", "rarely", "hardly", "almost",
            "ever", "nearly", "simply", "now", "then", "def", "surely", "normally", "typically", "constantly",
            "first", "once", "twice"}
_NOT_ADVERBS = {"apply", "reply", "rely", "supply", "fly", "ally", "belly", "bully", "tally", "rally"}
# Words after which "you" is an object, not a subject.
_GOVERNS = {"to", "for", "with", "about", "at", "from", "of", "on", "in", "by", "without", "than",
            "into", "onto", "upon", "after", "before", "behind", "around", "near", "against", "towards",
            "toward", "thank", "thanks", "see", "love", "miss", "tell", "told", "give", "gave", "send", "sent",
            "show", "showed", "let", "help", "helped", "ask", "asked", "get", "got", "make", "makes", "made",
            "remind", "reminds", "wish", "bring", "brought", "call", "inspire", "inspires", "inspired", "keep",
            "keeps", "teach", "taught", "take", "took", "meet", "met", "want", "need",
            "support", "encourage", "encouraged", "invite", "invited", "join", "owe", "trust", "believe",
            "bless", "congrats", "congratulate", "hug", "seeing", "meeting", "telling", "helping", "letting",
            "giving", "making", "getting", "showing", "as", "guide", "guided", "push", "pushed",
            "motivate", "motivates", "motivated", "allow", "allows", "allowed", "lets", "helps", "gives",
            "brings", "lead", "leads", "offer", "offers", "wishing", "sending"}
# Words after "you" that show it is no subject here (a noun, a preposition, a determiner ...).
_NOT_VERBS = {"and", "or", "but", "so", "to", "the", "a", "an", "my", "your", "his", "her", "our", "their",
              "this", "that", "these", "those", "for", "with", "about", "at", "from", "of", "on", "in", "by",
              "there", "here", "guys", "two", "more", "much", "very", "again", "back", "out", "up", "down",
              "if", "when", "as", "than", "it", "them", "him", "me", "us", "what", "how", "why",
              "where", "who", "which", "yet", "though", "anyway", "soon", "around", "well", "tomorrow",
              "today", "tonight", "later", "sometime", "someday", "either", "too", "not", "no", "yes", "man",
              "dear", "bro", "girl", "buddy", "everything", "anything", "something", "nothing", "some", "any",
              "one", "okay", "ok", "yourself", "each", "every", "is", "was", "has", "does", "myself",
              "sweetie", "friend", "happy", "pals", "folks", "lots", "many", "closer", "since", "luck", "peace",
              "joy", "happiness"}
# A verb inverted before its subject, for questions.
_INVERTED = {"am", "are", "were", "have", "do", "don't", "haven't", "aren't", "weren't"}
# A subject before a verb: then the verb is not inverted ("I have you to thank").
_SUBJECTS = {"i", "we", "they", "you", "he", "she", "it", "who", "that", "which", "people"}
# People named before "and I" / "or you": a compound subject, which keeps a plural verb.
_PEOPLE = {"you", "he", "she", "they", "we", "him", "her", "me", "them", "us", "wife", "husband", "partner",
           "kids", "family", "friends", "friend", "sister", "brother", "mom", "dad", "son", "daughter",
           "boyfriend", "girlfriend", "team", "parents", "mother", "father", "fiance", "fiancee", "dog", "cat",
           "hubby", "bf", "gf", "pup", "puppy", "children", "siblings", "cousin", "buddy", "pal", "coworkers"}
_PLURAL_YOU = {"guys", "all", "two", "both", "folks", "three", "lot"}


def _cased(word: str, like: str) -> str:
    return word[:1].upper() + word[1:] if like[:1].isupper() else word


def _third_person(verb: str) -> str | None:
    """The third-person singular of a present-tense verb; None when `verb` needs no change or is no verb."""
    low = verb.lower().replace("’", "'")
    if low in _THIRD:
        return _cased(_THIRD[low], verb)
    past = low.endswith("ed") and (not low.endswith("eed") or low in ("agreed", "freed", "guaranteed"))
    if low in _MODALS or low in _PAST or low in _AMBIGUOUS or past or low.endswith(("ing", "'s")) or "'" in low:
        return None
    if low.endswith("s") and not low.endswith("ss"):
        return None
    if low.endswith(("ss", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(low) > 1 and low.endswith("y") and low[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _is_adverb(low: str) -> bool:
    return low in _ADVERBS or (low.endswith("ly") and len(low) > 4 and low not in _NOT_ADVERBS)


class _Tokens:
    """The utterance as alternating word and gap tokens, with the word positions for look-around."""

    def __init__(self, text: str):
        self.toks = TOKEN.findall(text)
        self.words = [i for i, t in enumerate(self.toks) if t[0].isalpha()]
        self.rank = {i: k for k, i in enumerate(self.words)}

    def low(self, i: int) -> str:
        return self.toks[i].lower().replace("’", "'")

    def neighbour(self, i: int, step: int) -> int | None:
        """The word before (step -1) or after (+1) token i when only spaces stand between them."""
        k = self.rank[i] + step
        if not 0 <= k < len(self.words):
            return None
        j = self.words[k]
        gap = self.toks[min(i, j) + 1:max(i, j)]
        return j if all(g.strip() == "" for g in gap) else None

    def verb_after(self, i: int) -> int | None:
        """The first word after token i that is not an adverb (or "kind of"), in the same clause."""
        j = self.neighbour(i, 1)
        while j is not None:
            low = self.low(j)
            if low in ("kind", "sort"):
                nxt = self.neighbour(j, 1)
                if nxt is not None and self.low(nxt) == "of":
                    j = self.neighbour(nxt, 1)
                    continue
            if not _is_adverb(low):
                return j
            j = self.neighbour(j, 1)
        return None


def _inverted_before(tokens: _Tokens, i: int) -> int | None:
    """The auxiliary inverted before the subject at token i ("Are you", "How have you"), or None."""
    j = tokens.neighbour(i, -1)
    if j is None or tokens.low(j) not in _INVERTED:
        return None
    k = tokens.neighbour(j, -1)
    return j if k is None or tokens.low(k) not in _SUBJECTS else None


def _compound(tokens: _Tokens, i: int) -> bool:
    """Token i ends a compound subject ("my husband and I", "Jon and you"): its verb stays plural."""
    conj = tokens.neighbour(i, -1)
    if conj is None or tokens.low(conj) not in ("and", "or"):
        return False
    k = tokens.neighbour(conj, -1)
    return k is not None and (tokens.low(k) in _PEOPLE or (tokens.toks[k][:1].isupper() and
                                                            tokens.neighbour(k, -1) is not None))


def third_person(utterance: str, speaker: str, addressee: str) -> tuple[str, list[dict]]:
    """`utterance` with the speaker's and addressee's pronouns replaced by their names, verbs agreeing.

    Returns the text and one {"mention", "resolved"} per distinct replacement, in text order.
    """
    tokens = _Tokens(utterance)
    out = list(tokens.toks)
    references: list[dict] = []
    seen: set[tuple[str, str]] = set()

    def note(mention: str, resolved: str) -> None:
        if (mention, resolved) not in seen:
            seen.add((mention, resolved))
            references.append({"mention": mention, "resolved": resolved})

    for i in tokens.words:
        tok, low = tokens.toks[i], tokens.low(i)
        first = bool(speaker) and (low in ("i", "i'd") or low in _FIRST_OTHER or low.startswith("i'")
                                   and low in _CONTRACTED)
        second = bool(addressee) and (low in ("you", "you'd") or low in _SECOND_OTHER or low in _CONTRACTED
                                      and low.startswith("you"))
        if not (first or second):
            continue
        name = speaker if first else addressee
        if low in _FIRST_OTHER or low in _SECOND_OTHER:
            rep = (_FIRST_OTHER if first else _SECOND_OTHER)[low].format(n=name)
        elif low in _CONTRACTED:
            rep = f"{name} {_CONTRACTED[low]}"
        elif low in _WOULD_OR_HAD:
            nxt = tokens.neighbour(i, 1)
            had = nxt is not None and (tokens.low(nxt) in ("been", "better", "had", "never") or
                                       tokens.low(nxt) in _PAST or tokens.low(nxt).endswith("ed"))
            rep = f"{name} {'had' if had else 'would'}"
        else:
            nxt = tokens.neighbour(i, 1)
            if low == "you" and nxt is not None and tokens.low(nxt) in _PLURAL_YOU:
                continue                                        # "you guys", "you all": not the addressee alone
            rep = name
            prev = tokens.neighbour(i, -1)
            compound = _compound(tokens, i)
            inverted = _inverted_before(tokens, i)
            if inverted is not None:
                third = _third_person(tokens.toks[inverted])
                if third:
                    out[inverted] = third
            elif not compound and (prev is None or tokens.low(prev) not in _MODALS and
                                   (low == "i" or tokens.low(prev) not in _GOVERNS)):
                verb = tokens.verb_after(i)
                hyphened = verb is not None and tokens.toks[verb + 1:verb + 2] == ["-"]
                if verb is not None and not hyphened and tokens.low(verb) not in _NOT_VERBS:
                    third = _third_person(tokens.toks[verb])
                    if third:
                        out[verb] = third
        out[i] = rep
        note(tok, rep)
    return "".join(out), references


_SENTENCE_ENDS = ".!?;"
_THIRD_PEOPLE = {"he", "she", "him", "her", "his", "hers", "they", "them", "their"}


def readable(text: str, names: Iterable[str]) -> str:
    """`text` as a person reads it: once a sentence has named someone as its subject, a later "Name's" in it is
    "their" ("so Priya cancelled their holiday", not "Priya cancelled Priya's holiday"). Singular "they", since
    nothing says which pronoun the person uses. Display only: the rewrite keeps the name where it is indexed,
    where "Priya's" is what a query about Priya matches."""
    names = {n for n in names if n}
    tokens = _Tokens(text)
    out = list(tokens.toks)
    named, gap_from = "", 0
    for i in tokens.words:
        if any(mark in "".join(tokens.toks[gap_from:i]) for mark in _SENTENCE_ENDS):
            named = ""                                  # a new sentence names its subject again
        gap_from = i + 1
        tok = tokens.toks[i]
        stem, possessive = (tok[:-2], True) if tok.endswith(("'s", "’s")) else (tok, False)
        if stem in names:
            prev = tokens.neighbour(i, -1)
            if possessive and named == stem:
                out[i] = "their"                        # (never a sentence's first word: named is reset there)
            elif not possessive and (prev is None or tokens.low(prev) not in _GOVERNS):
                named = stem                            # named as a subject: "their" now refers back to them
            elif stem != named:
                named = ""                              # someone else named in between: "their" would be ambiguous
        elif (tok[0].isupper() and _inside(tokens, i)) or tokens.low(i) in _THIRD_PEOPLE:
            named = ""
    return "".join(out)


def _inside(tokens: _Tokens, i: int) -> bool:
    """Whether word i stands inside its sentence (a capital there is a name, not a sentence's first word)."""
    k = tokens.rank[i]
    if k == 0:
        return False
    gap = "".join(tokens.toks[tokens.words[k - 1] + 1:i])
    return not any(mark in gap for mark in _SENTENCE_ENDS)


__all__ = ["readable", "third_person"]
