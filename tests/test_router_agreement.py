"""MemLoom's offline router writes pronouns as the speaker's and addressee's names with the verbs agreeing:
the rewritten text is the summary a researcher reads on every page, so it must read as English."""
from __future__ import annotations

import json
import re

import pytest

from engine.llm.offline_events import rewrite
from engine.llm.pronouns import readable
from tests.conftest import LOCOMO, needs_data

WHEN = "2023-05-08T13:56:00"


@pytest.mark.parametrize("utterance, speaker, addressee, expected", [
    ("That's amazing, I get tired just thinking about it. Are you signed up for another one?", "Maya", "Jon",
     "That's amazing, Maya gets tired just thinking about it. Is Jon signed up for another one?"),
    ("I haven't committed yet", "Jon", "Maya", "Jon hasn't committed yet"),
    ("How have you been? I don't know if you're free.", "Caroline", "Melanie",
     "How has Melanie been? Caroline doesn't know if Melanie is free."),
    ("Do you have a dog? I really love my dog and I'd been meaning to tell you.", "Jon", "Gina",
     "Does Gina have a dog? Jon really loves Jon's dog and Jon had been meaning to tell Gina."),
    ("Thank you so much! You and I are alike, and I want to help.", "Jon", "Gina",
     "Thank Gina so much! Gina and Jon are alike, and Jon wants to help."),
    ("I went there last week and I'll send you pics. What do you think?", "Jon", "Gina",
     "Jon went there last week (week of 2023-05-01) and Jon will send Gina pics. What does Gina think?"),
])
def test_router_rewrites_pronouns_with_agreeing_verbs(utterance, speaker, addressee, expected):
    out = rewrite(utterance, speaker, WHEN, [{"speaker": addressee, "text": "hi"}])
    assert out["rewritten"] == expected


@pytest.mark.parametrize("text, expected", [
    ("The stage fell through, so Priya cancelled Priya's holiday. Priya's sister told Priya.",
     "The stage fell through, so Priya cancelled their holiday. Priya's sister told Priya."),
    ("Priya told Jon about Priya's plan.", "Priya told Jon about Priya's plan."),       # "their" could be Jon's
    ("Jon really loves Jon's dog and Gina loves Jon's cat.", "Jon really loves their dog and Gina loves Jon's cat."),
    ("Thank Gina for Gina's help", "Thank Gina for Gina's help"),                     # Gina is no subject here
])
def test_a_summary_says_their_after_its_subject_is_named(text, expected):
    assert readable(text, ["Priya", "Jon", "Gina"]) == expected


def test_router_rewrites_real_locomo_turns_without_first_or_second_person_verbs_on_a_name():
    """Every turn of the LoCoMo conversations: no name left with "am/are/have/haven't/don't/do/were" as
    its verb at a clause start ("Jon haven't"), no inverted "Are Jon"; the resolved references are listed."""
    data = json.loads(needs_data(LOCOMO).read_text())
    clause = r"(?:^|[.!?,;:\-–]\s+|\b(?:how|what|where|when|why|who|which|so|but|that|if)\s+)"
    plural = r"(?:am|are|were|have|haven't|don't|do|aren't|weren't|get|go|want|love|think|know|need|feel)"
    turns = rewritten = 0
    wrong = []
    for sample in data:
        conv = sample["conversation"]
        names = (conv["speaker_a"], conv["speaker_b"])
        subject = re.compile(rf"{clause}({'|'.join(names)}) {plural}\b(?!')", re.IGNORECASE)
        inverted = re.compile(rf"{clause}(?:am|are|were|do|have|don't|haven't|aren't|weren't) "
                              rf"({'|'.join(names)})\b(?!')(?! and)", re.IGNORECASE)
        for key, session in conv.items():
            if not key.startswith("session_") or not isinstance(session, list):
                continue
            window: list[dict] = []
            for turn in session:
                out = rewrite(turn["text"], turn["speaker"], WHEN, window[-4:])
                window.append({"speaker": turn["speaker"], "text": turn["text"]})
                turns += 1
                text = out["rewritten"]
                rewritten += text != turn["text"]
                wrong += [(m.group(0), text) for m in subject.finditer(text)]
                wrong += [(m.group(0), text) for m in inverted.finditer(text)]
                for ref in out["references"]:
                    assert ref["resolved"].split()[0].split("'")[0] in names
    assert turns > 4000 and rewritten > 2000
    assert [w for w, _ in wrong] == []
