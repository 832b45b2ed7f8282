"""The offline decision models read who a fact is about, its value and its mood from the parse, and give
probabilities (engine/llm/statements.py, engine/llm/decision_models.py)."""
from __future__ import annotations

import pytest

from engine.llm.decision_models import CAUSE_FEATURES, judge_cause, judge_update, models
from engine.llm.embedder import Embedder
from engine.llm.statements import UPDATE_FEATURES, analyse, update_features


@pytest.fixture(scope="module")
def embed():
    return Embedder().embed


def test_someone_elses_fact_is_ruled_out_however_alike_it_reads(embed) -> None:
    """"My sister has 3 cats" reads almost as "I have 2 cats" with a new number; the clauses are about two
    people, so the update model's veto gives the dev rate of such pairs, and the reason says so."""
    mine = judge_update("I have 2 cats.", "Tom", "We adopted another kitten, so I have 3 cats now.", "Tom", embed)
    hers = judge_update("I have 2 cats.", "Tom", "My sister has 3 cats.", "Tom", embed)
    rate = dict(models()["update"].vetoes)["other_holder"]
    assert mine.probability >= 0.9 and hers.probability == rate < 0.1
    assert "two people" in hers.reason and hers.features["other_holder"] == 1.0


def test_one_person_across_speakers_and_relatives_named_without_my() -> None:
    """Tom's "I" is Tom, Ana's "Tom" is Tom; "Gran" is the speaker's gran; "Sandra and I" holds the speaker."""
    from engine.llm.statements import person

    assert person(analyse("I moved to Leeds.", "Tom").clauses[0], "Tom") == "tom"
    assert person(analyse("Tom moved to Leeds.", "Ana").clauses[0], "Ana") == "tom"
    assert analyse("Gran turned ninety last Sunday.", "Tom").clauses[0].holder == "speaker's gran"
    assert analyse("Sandra and I split up.", "Tom").clauses[0].holder == "speaker"


def test_they_need_not_be_people(embed) -> None:
    """"They're great" answers "How are the cats?": a plural "they" is as often things as people, so it holds no
    one's fact, where "she" does; the cats' new count is then Tom's own statement, not someone else's."""
    assert analyse("They're great.", "Tom").clauses[0].holder == ""
    assert analyse("She's great.", "Tom").clauses[0].holder == "third"
    cats = judge_update("I love it. I have 2 cats, Miso and Pickle.", "Tom",
                        "They're great. We adopted another kitten, so I have 3 cats now.", "Tom", embed,
                        asked="How are the cats?")
    assert cats.features["new_other_holder"] == 0.0 and cats.probability >= 0.9


def test_an_age_in_words_and_a_plan_in_the_present_progressive() -> None:
    (age,) = [c for c in analyse("I'm twenty-nine though.", "Tom").clauses if c.counts]
    assert ("age", "29") in age.counts
    assert ("age", "30") in analyse("I turned 30 in the middle of it.", "Tom").clauses[0].counts
    assert analyse("I'm going to Lisbon in May.", "Tom").clauses[0].mood == "planned"
    assert analyse("I'm going to the gym every morning.", "Tom").clauses[0].mood == "stated"
    assert analyse("I went to Lisbon in May.", "Tom").clauses[0].mood == "stated"


def test_an_answer_takes_its_subject_from_both_questions(embed) -> None:
    """"Still there" answers "still at the garage?", and the new job answers "still at the garage?" too: with
    both questions the two answers are compared as what they are about."""
    bare = judge_update("Still there. Twelve years next month.", "Sam",
                        "Friday was my last day. I'm driving for a delivery firm now.", "Sam", embed)
    asked = judge_update("Still there. Twelve years next month.", "Sam",
                         "Friday was my last day. I'm driving for a delivery firm now.", "Sam", embed,
                         asked="Are you still at the garage?", old_asked="Still at the garage?")
    assert asked.features["context_cosine"] > bare.features["context_cosine"]
    assert asked.probability > bare.probability


def test_an_answer_that_says_no_to_the_question_denies_what_it_asked(embed) -> None:
    """"Nope." says no to "Still at the bank?", so the teaching job is the bank job's new value, though the
    answer never names the bank; "No idea yet" and a "No!" of surprise deny nothing."""
    old, new = "I'm still at the bank, doing mortgages. Fourteen years this summer.", \
        "Nope. Teaching maths at a secondary school in Harrow now."
    denied = judge_update(old, "Ravi", new, "Ravi", embed, asked="Still at the bank?")
    unsaid = judge_update(old, "Ravi", new.replace("Nope. ", ""), "Ravi", embed, asked="Still at the bank?")
    assert denied.features["denies_asked"] == pytest.approx(denied.features["asked_about_it"])
    assert denied.features["denies_asked"] > 0.3
    assert unsaid.features["denies_asked"] == 0.0 and denied.probability > unsaid.probability
    for reply in ("No idea yet.", "No! Where will I get my buns?"):
        assert judge_update(old, "Ravi", reply, "Ravi", embed, asked="Still at the bank?").features[
            "denies_asked"] == 0.0


def test_the_cause_model_reads_a_marked_consequence_and_a_question(embed) -> None:
    cause = {"text": "My landlord just put the rent up by two hundred a month.", "speaker": "Beth",
             "time": "2024-03-01T10:00:00"}
    marked = {"text": "Because of the rent I've gone back to my parents' for a while.", "speaker": "Beth",
              "time": "2024-04-01T10:00:00"}
    asked = {**marked, "text": "Have you thought about going back to your parents' for a while?"}
    a, b = judge_cause(-2.0, cause, marked, embed), judge_cause(-2.0, cause, asked, embed)
    assert set(a.features) == set(CAUSE_FEATURES) and a.features["consequence"] == 1.0
    assert 0.0 < b.probability < a.probability < 1.0 and "cause model" in a.reason


def test_a_pair_ruled_out_by_its_parse_embeds_nothing(embed) -> None:
    """Someone else's fact, or a question, is vetoed whatever the turns' likeness, so nothing of the pair is
    embedded: no text is asked of the embedder, and the probability and the reason are the veto's. A pair read
    whole embeds the question and the answer apart, never the two as one text."""
    from engine.llm.statements import update_texts

    asked_for: list[str] = []

    def recording(texts):
        asked_for.extend(texts)
        return embed(texts)

    for new, veto in (("My sister has 3 cats.", "two people"), ("Do you have 3 cats now?", "asks")):
        assert update_texts(analyse("I have 2 cats.", "Tom"), analyse(new, "Tom"), asked="How are the cats?") == []
        judged = judge_update("I have 2 cats.", "Tom", new, "Tom", recording, asked="How are the cats?")
        assert asked_for == [] and judged.probability < 0.05
        assert veto in judged.reason and "alike" not in judged.reason
    judged = judge_update("I have 2 cats.", "Tom", "I have 3 cats now.", "Tom", recording, asked="How are the cats?")
    assert "How are the cats?" in asked_for and "I have 3 cats now." in asked_for
    assert not [t for t in asked_for if "cats? " in t] and judged.probability >= 0.5


def test_statements_read_ahead_in_batches_are_the_statements_read_one_by_one(monkeypatch) -> None:
    """`analyse_ahead` parses a buffer's turns through spaCy's batched pipe; `analyse` then hands those back
    without parsing again, and each equals the statement the parser reads of the turn alone."""
    from engine.llm import statements

    said = [("I have 2 cats.", "Tom"), ("We adopted another kitten, so I have three cats now.", "Tom"),
            ("My sister moved to Leeds last year, didn't she?", "Ana"), ("If I ever quit, I'd sail to Lisbon.", "Ana"),
            ("I'm twenty-nine and I don't live in Leeds anymore.", "Tom"), ("I have 2 cats.", "Ana")]
    monkeypatch.setattr(statements, "_READ", {})
    alone = [statements.analyse(text, speaker) for text, speaker in said]
    monkeypatch.setattr(statements, "_READ", {})
    statements.analyse_ahead(said + said[:2])
    assert len(statements._READ) == len(said)

    def parsed_again():
        raise AssertionError("a statement read ahead was parsed again")

    monkeypatch.setattr(statements, "parser", parsed_again)
    assert [statements.analyse(text, speaker) for text, speaker in said] == alone
    assert alone[1].clauses and alone[1].speaker == "Tom" and alone[5].speaker == "Ana"


def test_a_vocative_an_imperative_and_a_change_not_made_are_no_new_value(embed) -> None:
    """Chat turns open by naming whom they speak to ("Thanks, Gina!"), urge ("Keep going") and promise not to
    change ("I won't quit"). None of these gives a fact a new value: the name is no value of what is said, the
    imperative states no one's fact, and a negated or modal change verb says that nothing changed. Before these
    readings, All-Mem applied Updates at 0.9 or more between such restatements of one LoCoMo speaker."""
    greeting = analyse("Hey Joanna, long time no see!", "Nate").clauses[0]
    assert greeting.entities == frozenset() and "joanna" not in greeting.slot
    assert analyse("Thanks, Gina! I won't quit, no matter what.", "Jon").clauses[1].change is False
    assert analyse("I can't stop writing.", "Jo").clauses[0].change is False
    assert analyse("I've quit my job.", "Jo").clauses[0].change is True
    assert {c.mood for c in analyse("Keep going and reach for your dreams.", "Nate").clauses} == {"urged"}
    assert analyse("Don't give up on your dreams!", "Nate").clauses[0].mood == "urged"
    assert analyse("Love it.", "Nate").clauses[0].mood == "stated"        # a dropped "I", not an imperative
    again = judge_update("Thanks, Gina! I won't quit, no matter what. Your encouragement really motivates me.",
                         "Jon", "Thanks, Gina! I won't quit, even when it's hard. I'm gonna make it!", "Jon", embed)
    assert again.probability < 0.3
    assert judge_update("I have 2 cats.", "Tom", "Thanks, Ana! We adopted another kitten, so I have 3 cats now.",
                        "Tom", embed).probability >= 0.9


def test_formulas_talk_of_the_talk_and_a_plan_carried_by_and_are_read_as_what_they_are(embed) -> None:
    """What LoCoMo's chats are full of and the decision sets rarely hold: formulas of politeness ("No problem,
    Nate!"), talk about the talk itself ("since we talked"), a second verb that shares the first one's plan
    ("gonna keep going and reach my dreams"), "can't wait", a place said again alone, a reason given as
    background ("Since I lost my job"). Each was read as a new value, and All-Mem superseded such restatements
    at 0.9 or more on LoCoMo dev (docs/DECISIONS.md, stop 67)."""
    assert analyse("No problem, Nate!", "Jo").clauses[0].mood == "phatic"
    assert analyse("Paris!", "Jo").clauses[0].mood == "stated"                 # an answer, not a formula
    assert analyse("Been a busy week since we talked.", "Nate").clauses[-1].mood == "phatic"
    assert analyse("We talked about moving to Leeds.", "Nate").clauses[0].mood == "stated"
    plan = analyse("I'm gonna keep going and reach my dreams no matter what.", "Jon").clauses
    assert {c.mood for c in plan} == {"planned"} and not any(c.negated for c in plan)
    assert analyse("I wanna start a dance studio.", "Jon").clauses[0].mood == "planned"
    eager = analyse("Can't wait to see the new studio!", "Jon").clauses[0]
    assert eager.mood == "planned" and not eager.negated
    assert analyse("I have no cats now.", "Tom").clauses[0].negated
    assert analyse("I just got back from the party.", "Tim").clauses[0].change is False
    assert analyse("I'm back on the biscuits.", "Tim").clauses[0].change is True
    assert analyse("Since I lost my job, things have been tough.", "Gina").clauses[0].change is False
    assert analyse("I lost my job last week.", "Gina").clauses[0].change is True
    assert analyse("We're together. Since June.", "Sami").clauses[-1].change is True     # when a state began
    assert analyse("It's rooibos and mint for me these days.", "Hamid").clauses[0].change is True
    assert analyse("Since I was a kid I've loved it.", "Jon").clauses[0].change is False  # how long, no change
    assert judge_update("No problem, Nate! Let me know if you like it!", "Jo",
                        "Thanks, Nate! It's a mix of drama and romance!", "Jo", embed).probability < 0.3
    # a present "not giving up" is no outcome of the plan (a plan's outcome is done or called off): gated, not
    # applied; the polarity of two alike clauses still flips ("not giving up" against "keep pushing")
    assert judge_update("I'm gonna keep pushing forward and continue taking time for myself.", "Jolene",
                        "I'm not giving up, just gonna keep pushing forward.", "Jolene", embed).probability < 0.9
    features, _ = update_features(analyse("Last week I went to a Harry Potter conference in the UK.", "Tim"),
                                  analyse("I just got back from the coolest Harry Potter party.", "Tim"), embed)
    assert features[UPDATE_FEATURES.index("entity_change")] == 0        # no value that was not there before


def test_every_clause_of_a_turn_is_read_the_copula_over_a_clause_a_fragment_and_a_plan_called_off(embed) -> None:
    """A copula at the root over a clause of its own ("We adopted a kitten, so now it's three cats"), over a verbal
    complement ("I'm back eating chicken"), a verbless fragment beside a clause ("Still no meat, but fish is back
    on my plate") and a clause hung on a noun ("happier news: a tabby turned up") were left out of the turn's
    clauses, so the count or the negation they say was never compared. A cancelling verb whose object is a
    pronoun calls off the plan said before it (docs/DECISIONS.md, stop 68)."""
    def texts(text: str) -> list[str]:
        return [c.text for c in analyse(text, "Tom").clauses]

    assert any("three cats" in t for t in texts("We adopted a kitten last weekend, so now it's three cats here."))
    assert any(("age", "29") in c.counts for c in analyse("I'm 29, turning 30 next year.", "Oli").clauses)
    assert texts("I'm back eating chicken.") == ["I 'm back eating chicken ."]
    fragment = analyse("Still no meat, but fish is back on my plate.", "Lia").clauses
    assert fragment[0].text.startswith("Still no meat") and fragment[0].negated
    assert any(t.startswith("a little tabby turned up") for t in texts("Happier news: a little tabby turned up."))
    # the newcomer's count, said in other words than the pinned demo's: a new number of the thing counted
    cats = judge_update("I've got two cats, Pepper and Salt.", "Tom",
                        "We adopted a kitten last weekend, so now it's three cats in the flat.", "Tom", embed)
    assert cats.features["number_change"] == 1.0 and cats.probability >= 0.5
    assert judge_update("I'm 29, turning 30 next year.", "Oli", "Well, I'm officially 30 as of yesterday!", "Oli",
                        embed).probability >= 0.9
    off = judge_update("We're planning a trip to Lisbon in May.", "Kai", "We cancelled it.", "Kai", embed)
    assert off.features["plan_then_outcome"] == 1.0
    other = judge_update("We're planning a trip to Lisbon in May.", "Kai", "We cancelled the gym membership.", "Kai",
                         embed)
    assert other.features["plan_then_outcome"] == 0.0              # a thing named is not the plan's pronoun


def test_a_progressive_dated_by_the_calendar_is_an_arrangement_and_a_plan_reported_finished_is_its_outcome(
        embed) -> None:
    """English dates an arrangement with the present progressive and a point of the calendar ("We're getting
    the kitchen redone in May"), where the present as the time ("this week") or a plural weekday ("on Fridays")
    is a report or a habit; a plan then "The kitchen's finished!" is the plan carried out, where "I finish at
    six", a present-tense verb, is a habit (docs/DECISIONS.md, stops 69 and 70)."""
    def mood(text: str) -> str:
        return analyse(text, "Tom").clauses[0].mood

    assert mood("We're getting the kitchen redone in May.") == "planned"
    assert mood("I'm seeing the doctor on Friday.") == "planned"
    assert mood("I'm working from home this week.") == "stated"
    assert mood("I'm working on Fridays now.") == "stated"
    assert mood("I'm feeling better since Monday.") == "stated"
    assert mood("She's staying in our spare room for now after the fall.") == "stated"    # a fall, not autumn
    assert mood("I'm feeling a spring in my step.") == "stated"
    done = judge_update("We're getting the kitchen redone in May.", "Tom", "The kitchen's finished!", "Tom", embed)
    assert done.features["plan_then_outcome"] == 1.0
    still = judge_update("We're getting the kitchen redone in May.", "Tom", "The kitchen's a mess.", "Tom", embed)
    assert still.features["plan_then_outcome"] == 0.0
    # "finish" as a present-tense verb is a habit, not the plan carried out (stop 70)
    habit = judge_update("I'm starting the pottery course in May.", "Tom",
                         "I finish the pottery course at six on Thursdays.", "Tom", embed)
    assert habit.features["plan_then_outcome"] == 0.0
    done = judge_update("I'm taking the pottery course in May.", "Tom", "Pottery course done!", "Tom", embed)
    assert done.features["plan_then_outcome"] == 1.0


def test_a_name_said_in_fewer_words_is_the_same_name_and_as_always_says_it_stayed(embed) -> None:
    """The recogniser's span of a name moves with the sentence around it ("the Royal Infirmary", then "the
    Royal"; "the food bank on Fridays", then "the food bank"): one said within the other is no new place, where
    another name is ("Leith", then "Portobello"). "As always" says that something stayed, as "still" does (stop
    71)."""
    royal = judge_update("I'm a nurse at the Royal Infirmary.", "Tom", "Still nursing at the Royal, still on nights.",
                         "Tom", embed)
    assert royal.features["entity_change"] == 0.0
    moved = judge_update("We live in a flat in Leith.", "Tom", "We live in a flat in Portobello now.", "Tom", embed)
    assert moved.features["entity_change"] == 1.0
    kept = judge_update("I volunteer at the food bank on Fridays.", "Tom", "Fridays at the food bank as always.",
                        "Tom", embed)
    assert kept.features["entity_change"] == 0.0 and kept.features["still"] == 1.0
