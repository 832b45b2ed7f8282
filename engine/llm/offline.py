"""The offline backend: deterministic, embedding- and rule-based answers for every role.

It needs no key and no network, so it is the default everywhere. It reads the
request's structured payload (not the rendered prompt), computes its answer
with explicit rules and returns JSON text, which then goes through the same
parsing and schema checks as a real model's reply. Confidences are the scores
the rules computed, never constants, so the 0.9 gate means something. This
module dispatches the roles and holds the plans; the rules of each family of
roles live in their own `engine.llm.offline_*` module.
"""
from __future__ import annotations

import json
from collections import Counter

from engine.core.text import has_negation, human_date, keywords_of, numbers, strip_speaker, words
from engine.llm import offline_answer, offline_diagnosis, offline_events, offline_recmem, offline_split
from engine.llm.base import BackendError, BackendReply, LLMBackend, LLMRequest, estimate_tokens
from engine.llm.embedder import Embedder
from engine.llm.roles import registered


def summary_of(text: str, speaker: str = "", time: str = "", max_words: int = 60) -> str:
    """Extractive summary: the statement itself (trimmed), attributed and dated."""
    spk, body = strip_speaker(text)
    speaker = speaker or spk
    tokens = body.split()
    clipped = " ".join(tokens[:max_words]) + (" …" if len(tokens) > max_words else "")
    date = human_date(time)
    head = f"{speaker} ({date})" if speaker and date else speaker or date
    return f"{head}: {clipped}" if head else clipped


class OfflineBackend(LLMBackend):
    name = "offline"
    model = "offline-rules-v1"

    def __init__(self, embedder: Embedder):
        self.embedder = embedder

    def generate(self, request: LLMRequest) -> BackendReply:
        data = self.foresee(request.role, request.payload)
        if data is None:
            raise BackendError("UNSUPPORTED_ROLE", f"offline backend has no rule for role {request.role!r}")
        text = json.dumps(data, ensure_ascii=False)
        prompt_text = " ".join(m["content"] for m in request.messages)
        return BackendReply(text=text, prompt_tokens=estimate_tokens(prompt_text),
                            completion_tokens=estimate_tokens(text), model=self.model)

    # -- roles -----------------------------------------------------------------
    def _descriptor(self, p: dict) -> dict:
        return {"summary": summary_of(p["text"], p.get("speaker", ""), p.get("time", "")),
                "keywords": keywords_of(p["text"])}

    def _diagnosis(self, p: dict) -> dict:
        return offline_diagnosis.diagnose(p, self.embedder)

    def _split_plan(self, p: dict) -> dict:
        raw = p["original_text"]
        split = offline_split.best_split(raw, self.embedder, floor=offline_split.SPLIT_FLOOR)
        if split is None:
            return {"do_split": False, "split_rationale": "one coherent topic",
                    "segments": [self._segment(raw, "whole")]}
        conf, cut, reason = split
        parts = [raw[:cut].rstrip(), raw[cut:].lstrip()]
        return {"do_split": True, "split_rationale": reason,
                "segments": [self._segment(part, f"topic {i + 1}") for i, part in enumerate(parts)]}

    def _merge_plan(self, p: dict) -> dict:
        sources = p["sources"]
        bodies = [strip_speaker(s["raw"])[1] for s in sources]
        vecs = self.embedder.embed(bodies)
        centroid = vecs.mean(axis=0)
        # cosines rounded before the tie-break: two sources are equally central in exact arithmetic, and
        # float noise (another encoder, another batch) must not pick the summary
        medoid = max(range(len(sources)),
                     key=lambda i: (round(float(vecs[i] @ centroid), 4), sources[i]["time"], i))
        counts = Counter(k.lower() for s in sources for k in s.get("keywords", []))
        first_seen = {k: i for i, k in reversed(list(enumerate(k.lower() for s in sources for k in s["keywords"])))}
        keywords = sorted(counts, key=lambda k: (-counts[k], first_seen[k]))[:10]
        points = list(dict.fromkeys(b.strip() for b in bodies))[:3]
        return {"summary": sources[medoid]["summary"], "keywords": keywords, "salient_points": points}

    def _update_plan(self, p: dict) -> dict:
        cur, old = p["current"], p["superseded"]
        gone = sorted(numbers(old["raw"]) - numbers(cur["raw"]))
        deprecations = [f"earlier value {g}" for g in gone]
        if has_negation(cur["raw"]) != has_negation(old["raw"]):
            deprecations.append("earlier statement with the opposite polarity")
        note = (f"statement of {human_date(cur['time'])} replaces the one of {human_date(old['time'])}; "
                "the older evidence stays archived behind a version link")
        # The refreshed descriptor keeps the superseded statement's keywords beside the current ones, so a
        # question about the earlier state still anchors on the current unit and walks its version link back.
        keywords = list(dict.fromkeys([*cur["keywords"], *old["keywords"]]))
        return {"updated_summary": cur["summary"], "updated_keywords": keywords,
                "deprecations": deprecations, "alignment_note": note}

    def _router(self, p: dict) -> dict:
        return offline_events.rewrite(p["utterance"], p.get("speaker", ""), p.get("time", ""), p.get("window", []))

    def _relation_synthesis(self, p: dict) -> dict:
        return offline_events.synthesize(p, self.embedder)

    def _event_merge(self, p: dict) -> dict:
        return offline_events.judge_merge(p)

    def _episode_extraction(self, p: dict) -> dict:
        return offline_recmem.extract_episodes(p, self.embedder)

    def _episode_merge(self, p: dict) -> dict:
        return offline_recmem.merge_episode(p, self.embedder)

    def _fact_refinement(self, p: dict) -> dict:
        return offline_recmem.refine_facts(p, self.embedder)

    def _answer(self, p: dict) -> dict:
        return offline_answer.answer(p["question"], p.get("passages", []), self.embedder)

    def _boundary_detection(self, p: dict) -> dict:
        from engine.llm import offline_topics

        return offline_topics.detect_boundaries(p, self.embedder)

    def _topic_summary(self, p: dict) -> dict:
        from engine.llm import offline_topics

        return offline_topics.summarize(p, self.embedder)

    def _topic_relation(self, p: dict) -> dict:
        from engine.llm import offline_topics

        return offline_topics.relate(p)

    # -- ahead of the roles ----------------------------------------------------
    def prefetch(self, role: str, payloads: list[dict]) -> None:
        """Embed what the diagnosis of these payloads will score (cuts, aligned sentences) in large batches."""
        if role == "diagnosis":
            offline_diagnosis.prefetch(payloads, self.embedder)

    def foresee(self, role: str, payload: dict) -> dict | None:
        """The rules' answer, which `generate` returns as JSON (None for a role they have no rule for)."""
        handler = getattr(self, f"_{role}", None)
        if handler is not None:
            return handler(payload)
        outside = registered(role)                # a role an installed engine brought, with its own rule
        return outside.offline(payload, self.embedder) if outside is not None and outside.offline else None

    def _segment(self, text: str, label: str) -> dict:
        return {"segment_text": text, "segment_summary": summary_of(text),
                "segment_keywords": keywords_of(text) or words(text)[:3], "topic_label": label}

