"""The knowledge graph: extraction (real spaCy), the store over SQLite and over a real PostgreSQL
(pgserver's, started by the test), alignment (real embeddings)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragmend.errors import ConfigError, ModelUnavailable
from ragmend.kg import (
    AlignThresholds,
    KGStore,
    RebelTripleExtractor,
    SpacyTripleExtractor,
    Triple,
    TripleExtractor,
    align,
    align_text,
    build_extractor,
    embed_with,
    parse_rebel,
)
from ragmend.kg.graphdb import GraphDatabase, SqliteGraph
from ragmend.kg.phrases import Embed, keys_agree, name_key, number_key
from ragmend.models.registry import ModelRegistry
from ragmend.settings import load_settings, settings_with

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def extractor(registry: ModelRegistry) -> SpacyTripleExtractor:
    return SpacyTripleExtractor(registry.spacy)


@pytest.fixture(scope="module")
def embed(registry: ModelRegistry) -> Embed:
    return embed_with(registry.embeddings)


def spo(triples: list[Triple]) -> list[tuple[str, str, str]]:
    return [(t.subject, t.relation, t.object) for t in triples]


def one(extractor: TripleExtractor, text: str) -> list[Triple]:
    return extractor.extract([text])[0]


# -- extraction --------------------------------------------------------------------------------


def test_active_clause_and_its_passive_give_one_triple(extractor: SpacyTripleExtractor) -> None:
    active, passive = extractor.extract(["Spielberg directed Jaws.", "Jaws was directed by Spielberg."])
    assert spo(active) == spo(passive) == [("Spielberg", "direct", "Jaws")]
    assert not active[0].negated and active[0].numbers == ()


def test_prepositional_relation_with_spans(extractor: SpacyTripleExtractor) -> None:
    text = "Marie Curie was born in Warsaw."
    (t,) = one(extractor, text)
    assert (t.subject, t.relation, t.object) == ("Marie Curie", "bear_in", "Warsaw")
    assert text[slice(*t.subject_span)] == "Marie Curie" and text[slice(*t.object_span)] == "Warsaw"
    assert t.sentence == text and t.source == ""


def test_copula_apposition_and_conjunctions(extractor: SpacyTripleExtractor) -> None:
    assert spo(one(extractor, "Paris is the capital of France.")) == [
        ("Paris", "be", "the capital of France")
    ]
    assert spo(one(extractor, "The Eiffel Tower is in Paris.")) == [("The Eiffel Tower", "be_in", "Paris")]
    appos = spo(one(extractor, "Barack Obama, a former senator, won the election."))
    assert ("Barack Obama", "be", "a former senator") in appos
    assert ("Barack Obama", "win", "the election") in appos
    # A hyphenated word is one word, not three objects.
    cofounder = spo(one(extractor, "Andrew Jaspan was the co-founder of The Conversation."))
    assert cofounder == [("Andrew Jaspan", "be", "the co-founder of The Conversation")]
    # Name lists are appositions to the parser, not "X is Y" statements.
    place = spo(one(extractor, "The airport is in Grand Rapids, Michigan (IATA: GRR)."))
    assert not [t for t in place if t[1] == "be"] and ("The airport", "be_in", "Grand Rapids") in place
    both = spo(one(extractor, "The film was directed by Steven Spielberg and Peter Jackson."))
    assert both == [("Steven Spielberg", "direct", "The film"), ("Peter Jackson", "direct", "The film")]
    # A relative clause attaches to its noun; a verb conjunct shares the subject.
    rel = spo(one(extractor, "Curie, who was born in Warsaw, moved to Paris."))
    assert rel == [("Curie", "bear_in", "Warsaw"), ("Curie", "move_to", "Paris")]
    conj = spo(one(extractor, "Marie Curie was born in Warsaw and died in Passy."))
    assert conj == [("Marie Curie", "bear_in", "Warsaw"), ("Marie Curie", "die_in", "Passy")]


def test_negation_is_kept(extractor: SpacyTripleExtractor) -> None:
    did_not, never, no, plain = extractor.extract(
        [
            "Barack Obama did not win the election.",
            "Einstein never visited Antarctica.",
            "The band has no members.",
            "Einstein visited Antarctica.",
        ]
    )
    assert [(t.object, t.negated) for t in did_not] == [("the election", True)]
    assert [(t.relation, t.negated) for t in never] == [("visit", True)]
    assert [(t.object, t.negated) for t in no] == [("no members", True)]
    assert [t.negated for t in plain] == [False]


def test_numbers_and_dates_are_kept_verbatim(extractor: SpacyTripleExtractor) -> None:
    triples = one(extractor, "Curie won the Nobel Prize in Physics in 1903. It was worth $40,000 then.")
    by_rel = {t.relation: t for t in triples}
    assert by_rel["win"].object == "the Nobel Prize in Physics" and by_rel["win"].numbers == ()
    assert (by_rel["win_in"].object, by_rel["win_in"].numbers) == ("1903", ("1903",))
    jaws = {t.relation: t for t in one(extractor, "Jaws is a 1975 film. It grossed $470 million worldwide.")}
    assert (jaws["be"].object, jaws["be"].numbers) == ("a 1975 film", ("1975",))
    # "It" is the film: a pronoun subject takes the latest named subject of the text.
    assert (jaws["gross"].subject, jaws["gross"].numbers) == ("Jaws", ("$470 million",))


def test_pronouns_batches_and_limits(registry: ModelRegistry, extractor: SpacyTripleExtractor) -> None:
    texts = ["Yes.", "Marie Curie was a physicist. She died in Passy.", "", "He was born in Rome."]
    yes, curie, empty, unresolved = extractor.extract(texts)
    assert yes == [] and empty == [] and unresolved == []
    assert spo(curie) == [("Marie Curie", "be", "a physicist"), ("Marie Curie", "die_in", "Passy")]
    # The resolved subject's span points at the antecedent.
    assert texts[1][slice(*curie[1].subject_span)] == "Marie Curie"
    # "It" is the topic (the main clause's subject), not the subject the participle got.
    airport = one(extractor, "GAIA is the airport of Barbados, located in Seawell. It is a gateway.")
    assert ("GAIA", "be", "a gateway") in spo(airport)
    capped = SpacyTripleExtractor(registry.spacy, max_triples_per_text=1).extract([texts[1]])[0]
    assert spo(capped) == spo(curie[:1])


def test_number_keys() -> None:
    assert number_key(["about 5 million"]) == number_key(["5 million"]) != number_key(["5 billion"])
    assert number_key(["two"]) == number_key(["2"]) and number_key(["1,000"]) == number_key(["1000"])
    assert keys_agree(number_key(["1867"]), number_key(["7 November 1867"]))
    assert not keys_agree(number_key(["1868"]), number_key(["7 November 1867"]))
    assert name_key("the capital of France") == {"france"} and name_key("the 1990 election") == set()
    assert keys_agree(name_key("Steven Spielberg"), name_key("Spielberg's"))
    assert not keys_agree(name_key("the Nobel Prize in Physics"), name_key("the Nobel Prize in Chemistry"))


# -- REBEL -------------------------------------------------------------------------------------


def test_parse_rebel_literal_outputs() -> None:
    # The model card's example: several triplets, several <subj>/<obj> groups under one head.
    out = (
        "<s><triplet> Punta Cana <subj> Higuey <obj> located in the administrative territorial entity "
        "<subj> La Altagracia Province <obj> located in the administrative territorial entity <subj> "
        "Dominican Republic <obj> country <triplet> Higuey <subj> La Altagracia Province <obj> located in "
        "the administrative territorial entity <subj> Dominican Republic <obj> country</s><pad><pad>"
    )
    lit = "located in the administrative territorial entity"
    assert parse_rebel(out) == [
        ("Punta Cana", lit, "Higuey"),
        ("Punta Cana", lit, "La Altagracia Province"),
        ("Punta Cana", "country", "Dominican Republic"),
        ("Higuey", lit, "La Altagracia Province"),
        ("Higuey", "country", "Dominican Republic"),
    ]
    # Markers need no spaces around them.
    assert parse_rebel("<triplet>Marie Curie<subj>Warsaw<obj>place of birth</s>") == [
        ("Marie Curie", "place of birth", "Warsaw")
    ]
    # Malformed groups are skipped, not guessed at.
    assert parse_rebel("") == [] and parse_rebel("<s>no triplets here</s>") == []
    assert parse_rebel("<subj> Warsaw <obj> place of birth") == []
    assert parse_rebel("<triplet> Curie <subj> <obj> award received <triplet> A <subj> B <obj>") == []
    assert parse_rebel("<triplet> A <subj> B <obj> r1 <triplet> C <subj> D <obj> r2 trailing") == [
        ("A", "r1", "B"),
        ("C", "r2 trailing", "D"),
    ]


def test_rebel_needs_a_hub_or_a_local_model(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailable, match=r"models\.allow_hub"):
        RebelTripleExtractor("Babelscape/rebel-large", allow_hub=False)
    settings = load_settings(data_dir=tmp_path, kg={"extractor": "rebel"})
    with pytest.raises(ModelUnavailable, match="REBEL"):
        build_extractor(settings)


def test_rebel_extractor_runs_a_local_seq2seq_model(tmp_path: Path) -> None:
    """The generate/decode path on a tiny random BART: the interface, not REBEL's quality."""
    from transformers import AutoTokenizer, BartConfig, BartForConditionalGeneration

    from ragmend.models import bundled

    tok = AutoTokenizer.from_pretrained(str(bundled.EMBEDDINGS.path()))
    tok.add_special_tokens({"additional_special_tokens": ["<triplet>", "<subj>", "<obj>"]})
    config = BartConfig(
        vocab_size=len(tok),
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=64,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.cls_token_id,
        eos_token_id=tok.sep_token_id,
        decoder_start_token_id=tok.cls_token_id,
    )
    BartForConditionalGeneration(config).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    rebel = RebelTripleExtractor(str(tmp_path), max_input_tokens=32, max_output_tokens=8, num_beams=1)
    out = rebel.extract(["Marie Curie was born in Warsaw.", "", "Paris is in France."])
    assert len(out) == 3 and out[1] == []
    assert all(isinstance(t, Triple) for ts in out for t in ts)
    assert rebel.name == f"rebel:{tmp_path}"


# -- the store ---------------------------------------------------------------------------------


@dataclass
class Counting:
    """The real extractor, with a count of what it was asked to read (and a failure on demand)."""

    inner: TripleExtractor
    fail_on_call: int = 0
    calls: int = 0
    texts: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.inner.name

    def extract(self, texts: list[str]) -> list[list[Triple]]:
        self.calls += 1
        if self.calls == self.fail_on_call:
            raise RuntimeError("extractor died")
        self.texts.extend(texts)
        return self.inner.extract(texts)


CURIE = "Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1903."
JAWS = "Jaws is a 1975 film directed by Steven Spielberg."
OBAMA = "Barack Obama was born in Hawaii."


def docs(**texts: str) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    # The fingerprint is the text itself: enough to tell a change.
    return {d: (text, [(f"{d}#0", text)]) for d, text in texts.items()}


@pytest.fixture(params=["sqlite", "postgres"])
def graph_db(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], GraphDatabase]:
    """Opens the test's graph (each call a new handle, as another process would): a SQLite file,
    or a namespace of a new PostgreSQL database."""
    if request.param == "sqlite":
        return lambda: SqliteGraph(tmp_path / "kg.sqlite3")
    from ragmend.kg.pggraph import PgGraph

    dsn = request.getfixturevalue("dsn")
    return lambda: PgGraph(dsn, "kgtest")


def test_sync_is_incremental(
    graph_db: Callable[[], GraphDatabase], extractor: SpacyTripleExtractor, embed: Embed
) -> None:
    counting = Counting(extractor)
    store = KGStore(graph_db(), counting, embed, embed_name="minilm")
    r = store.sync(docs(curie=CURIE, jaws=JAWS))
    assert (r.added, r.updated, r.unchanged, r.removed, r.texts_extracted) == (2, 0, 0, 0, 2)
    first = store.stats()
    assert first.docs == 2 and first.triples == r.triples_added >= 5 and first.subjects == 3

    # Nothing changed: nothing read, nothing embedded, nothing written.
    counting.texts.clear()
    r = store.sync(docs(curie=CURIE, jaws=JAWS))
    assert (r.unchanged, r.texts_extracted, r.phrases_embedded, counting.texts) == (2, 0, 0, [])
    assert store.stats() == first

    # One changed, one new, one removed: only the changed and new texts are read.
    changed = JAWS.replace("1975", "1976")
    r = store.sync(docs(jaws=changed, obama=OBAMA))
    assert (r.added, r.updated, r.unchanged, r.removed) == (1, 1, 0, 1)
    assert counting.texts == [changed, OBAMA]
    assert store.triples("curie") == [] and store.fingerprints() == {"jaws": changed, "obama": OBAMA}
    jaws = store.triples("jaws")
    assert {t.triple.object for t in jaws} >= {"a 1976 film"} and all(t.node_id == "jaws#0" for t in jaws)
    assert all(t.triple.source == "jaws#0" for t in jaws)
    # Phrases only the removed document used are gone with it.
    assert store.stats().phrases < first.phrases + 3


@pytest.mark.parametrize("commit_texts", [2048, 1], ids=["one-transaction", "chunked"])
def test_extractor_change_reextracts_everything(
    graph_db: Callable[[], GraphDatabase], registry: ModelRegistry, embed: Embed, commit_texts: int
) -> None:
    KGStore(graph_db(), SpacyTripleExtractor(registry.spacy), embed).sync(docs(jaws=JAWS, obama=OBAMA))
    other = SpacyTripleExtractor(registry.spacy, max_triples_per_text=1)
    other.name += "-capped"
    r = KGStore(graph_db(), other, embed, commit_texts=commit_texts).sync(docs(jaws=JAWS, obama=OBAMA))
    assert r.full and r.updated == 2 and r.texts_extracted == 2
    assert KGStore(graph_db(), other, embed).stats().triples == 2


def test_a_failed_sync_leaves_the_previous_graph(
    graph_db: Callable[[], GraphDatabase], extractor: SpacyTripleExtractor, embed: Embed
) -> None:
    KGStore(graph_db(), extractor, embed).sync(docs(curie=CURIE, jaws=JAWS))
    before = KGStore(graph_db(), extractor, embed)
    old = (before.stats(), before.triples(), before.fingerprints())
    # The first batch (curie's new text) is deleted and re-inserted, then the second batch fails.
    failing = Counting(extractor, fail_on_call=2)
    store = KGStore(graph_db(), failing, embed, batch_texts=1)
    with pytest.raises(RuntimeError, match="extractor died"):
        store.sync(docs(curie="Marie Curie was born in Paris.", obama=OBAMA))
    assert failing.calls == 2 and (store.stats(), store.triples(), store.fingerprints()) == old
    # The store is usable afterwards.
    assert store.sync(docs(curie=CURIE, obama=OBAMA)).added == 1


_KILLED_SYNC = """
import hashlib, os, signal, sys
import numpy as np
from ragmend.kg.store import KGStore
from ragmend.kg.triples import Triple

class Words:
    name = "first-and-last-word"
    def __init__(self, die_on_call):
        self.calls, self.die_on_call = 0, die_on_call
    def extract(self, texts):
        self.calls += 1
        if self.calls == self.die_on_call:
            os.kill(os.getpid(), signal.SIGKILL)
        return [[Triple(subject=t.split()[0], relation="say", object=t.split()[-1])] for t in texts]

def embed(texts):
    seeds = [int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little") for t in texts]
    return np.stack([np.random.default_rng(s).normal(size=8) for s in seeds]).astype(np.float32)

path, die_on_call, commit_texts, *texts = sys.argv[1:]
if path.startswith("postgresql://"):
    from ragmend.kg.pggraph import PgGraph
    path = PgGraph(path, "kgtest")
store = KGStore(path, Words(int(die_on_call)), embed, batch_texts=1, commit_texts=int(commit_texts))
store.sync({f"d{i}": (t, [(f"d{i}#0", t)]) for i, t in enumerate(texts)})
print(store.extractor.calls)
"""


def _run_killable_sync(path: str, die_on_call: int, commit_texts: int, *texts: str) -> tuple[int, str]:
    args = [sys.executable, "-c", textwrap.dedent(_KILLED_SYNC), path, str(die_on_call), str(commit_texts)]
    done = subprocess.run(
        [*args, *texts], cwd=REPO, env=dict(os.environ), timeout=120, capture_output=True, text=True
    )
    return done.returncode, done.stdout.strip()


@pytest.fixture(params=["sqlite", "postgres"])
def graph_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the killable sync writes: a SQLite path or a PostgreSQL DSN (namespace "kgtest")."""
    if request.param == "sqlite":
        return str(tmp_path / "kg.sqlite3")
    return str(request.getfixturevalue("dsn"))


class _NoExtractor:
    name = "first-and-last-word"

    def extract(self, texts: list[str]) -> list[list[Triple]]:
        raise AssertionError("a read extracts nothing")


def _stored(location: str) -> tuple[list[tuple[str, str, str]], list[str]]:
    """(doc_id, subject, object) of every triple in insertion order, and the documents held."""
    if location.startswith("postgresql://"):
        from ragmend.kg.pggraph import PgGraph

        db: GraphDatabase = PgGraph(location, "kgtest")
    else:
        con = sqlite3.connect(location)
        # SQLite's own checks: the file is whole and still in WAL mode after a kill.
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        db = SqliteGraph(location)
    store = KGStore(db, _NoExtractor(), lambda t: np.zeros((len(t), 8), dtype=np.float32))
    triples = [(t.doc_id, t.triple.subject, t.triple.object) for t in store.triples()]
    return triples, sorted(store.fingerprints())


def test_a_killed_sync_leaves_the_previous_graph(graph_location: str) -> None:
    def run(die_on_call: int, *texts: str) -> int:
        return _run_killable_sync(graph_location, die_on_call, 2048, *texts)[0]

    assert run(0, "alpha one", "beta two") == 0
    old = _stored(graph_location)
    assert old == ([("d0", "alpha", "one"), ("d1", "beta", "two")], ["d0", "d1"])
    # Killed (SIGKILL) while extracting the second batch, after the first was written.
    assert run(2, "gamma three", "delta four", "epsilon five") == -9
    assert _stored(graph_location) == old


def test_a_killed_large_sync_keeps_its_commits_and_resumes(graph_location: str) -> None:
    # commit_texts=2: a build of five one-text documents commits after every second document.
    texts = ["alpha one", "beta two", "gamma three", "delta four", "epsilon five"]
    assert _run_killable_sync(graph_location, 4, 2, *texts)[0] == -9  # killed extracting the fourth text
    assert _stored(graph_location) == ([("d0", "alpha", "one"), ("d1", "beta", "two")], ["d0", "d1"])
    # The next sync extracts only the three documents the kill lost.
    assert _run_killable_sync(graph_location, 0, 2, *texts) == (0, "3")
    triples, _ = _stored(graph_location)
    assert sorted((d, s) for d, s, _ in triples) == [(f"d{i}", t.split()[0]) for i, t in enumerate(texts)]


# -- alignment ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory, extractor: SpacyTripleExtractor, embed: Embed) -> KGStore:
    store = KGStore(tmp_path_factory.mktemp("kg") / "kg.sqlite3", extractor, embed)
    store.sync(docs(curie=CURIE, jaws=JAWS, obama=OBAMA))
    return store


def kappa(text: str, extractor: TripleExtractor, graph: KGStore, embed: Embed) -> str:
    return align_text(text, extractor, graph, embed).kappa


def test_the_four_kappa_values(graph: KGStore, extractor: SpacyTripleExtractor, embed: Embed) -> None:
    wrong = align_text("Marie Curie was born in Paris.", extractor, graph, embed)
    assert wrong.kappa == "conflict"
    (m,) = wrong.triples
    # The explanation: the graph triple that disagrees, where it is, and the three similarities.
    assert m.kg_triple is not None and m.kg_triple.triple.object == "Warsaw"
    assert (m.kg_triple.doc_id, m.kg_triple.node_id) == ("curie", "curie#0")
    assert m.subject_sim >= 0.9 and m.relation_sim >= 0.9 and m.object_sim < 0.5
    assert m.reason == "same subject and relation, another object"

    right = align_text("Marie Curie was born in Warsaw.", extractor, graph, embed)
    assert right.kappa == "consistent" and right.triples[0].object_sim > 0.99
    shown: Any = right.as_dict()  # the API's JSON shape
    assert shown["triples"][0]["kg"]["sentence"].startswith("Marie Curie was born in Warsaw")

    absent = align_text("The Eiffel Tower is in Paris.", extractor, graph, embed)
    assert absent.kappa == "missing" and absent.triples[0].subject_sim < 0.9

    assert align_text("Yes.", extractor, graph, embed).as_dict() == {"kappa": "no_triplet", "triples": []}


def test_numbers_negation_voice_and_aggregation(
    graph: KGStore, extractor: SpacyTripleExtractor, embed: Embed
) -> None:
    def k(text: str) -> str:
        return kappa(text, extractor, graph, embed)

    # A different year is a conflict even though "1868" and "1867" embed alike.
    wrong_year = align_text("Marie Curie was born in 1868.", extractor, graph, embed)
    assert wrong_year.kappa == "conflict" and "numbers" in wrong_year.triples[0].reason
    assert k("Marie Curie was born in 1867.") == "consistent"
    assert k("Marie Curie was not born in Warsaw.") == "conflict"
    # The graph holds "directed by" (a participle); the response says it actively.
    assert k("Steven Spielberg directed Jaws.") == "consistent"
    # Titanic embeds near Jaws (0.54, over the object threshold): the names tell them apart.
    titanic = align_text("Steven Spielberg directed Titanic.", extractor, graph, embed)
    assert (
        titanic.kappa == "conflict" and titanic.triples[0].reason == "same subject and relation, another name"
    )
    assert k("Marie Curie won the Nobel Prize in Chemistry.") == "conflict"
    assert k("Marie Curie won the Nobel Prize in Physics.") == "consistent"
    # Any conflict wins; else any consistent triple; unknown facts alongside do not matter.
    assert k("Marie Curie was born in Warsaw. The Eiffel Tower is in Paris.") == "consistent"
    assert k("Marie Curie was born in Warsaw and won the Nobel Prize in Physics in 1911.") == "conflict"


def test_thresholds_are_configurable(graph: KGStore, extractor: SpacyTripleExtractor, embed: Embed) -> None:
    triples = one(extractor, "Marie Curie was born in Paris.")
    # An object threshold of 0 accepts any object: the wrong city now matches.
    assert align(triples, graph, embed, AlignThresholds(object=0.0)).kappa == "consistent"
    # A subject threshold above 1 matches nothing.
    assert align(triples, graph, embed, AlignThresholds(subject=1.01)).kappa == "missing"
    s = settings_with(load_settings(), kg={"thresholds": {"object": 0.7}})
    assert AlignThresholds.from_settings(s.kg) == AlignThresholds(0.9, 0.9, 0.7)
    with pytest.raises(ConfigError, match=r"kg\.thresholds\.object"):
        load_settings(kg={"thresholds": {"object": 1.5}})
    assert load_settings().kg.extractor == "spacy" and load_settings().kg.max_triples_per_chunk == 32


def test_alignment_embeds_only_the_response(
    graph: KGStore, extractor: SpacyTripleExtractor, embed: Embed
) -> None:
    seen: list[str] = []

    def watching(texts: list[str]) -> np.ndarray:
        seen.extend(texts)
        return embed(texts)

    align(one(extractor, "Marie Curie was born in Paris."), graph, watching)
    assert sorted(seen) == ["bear in", "marie curie", "paris"]
    with pytest.raises(ConfigError, match="-d"):
        align(one(extractor, "Marie Curie was born in Paris."), graph, lambda t: np.ones((len(t), 3)))


def test_empty_graph_is_missing(tmp_path: Path, extractor: SpacyTripleExtractor, embed: Embed) -> None:
    store = KGStore(tmp_path / "kg.sqlite3", extractor, embed)
    result = align(one(extractor, "Marie Curie was born in Paris."), store, embed)
    assert result.kappa == "missing" and result.triples[0].kg_triple is None


def test_the_embedding_memo_runs_the_encoder_once_per_text() -> None:
    import doctest

    from ragmend.kg import phrases

    assert doctest.testmod(phrases).failed == 0
