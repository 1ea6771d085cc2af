"""Incremental ingest and crash safety over the real embedding model and real llama-index indexes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ragmend.engine import Engine
from ragmend.errors import InputError
from ragmend.models.registry import ModelRegistry
from ragmend.rag.store import DocEntry, IndexBackend, IndexStore
from tests.conftest import tiny_settings


def _engine(tmp_path: Path, registry: ModelRegistry) -> Engine:
    settings = tiny_settings(tmp_path)
    return Engine(settings, models=ModelRegistry.sharing(registry, settings))


def _docs(store: IndexBackend) -> dict[str, DocEntry]:
    manifest = store.read_manifest()
    assert manifest is not None, "no index generation is current"
    return manifest.docs


def _write(path: Path, docs: dict[str, str]) -> Path:
    path.write_text("".join(json.dumps({"id": k, "title": k, "text": v}) + "\n" for k, v in docs.items()))
    return path


DOCS = {
    "Ada Lovelace": "Ada Lovelace wrote the first algorithm meant for Babbage's Analytical Engine.",
    "Grace Hopper": "Grace Hopper developed the first compiler, A-0, and machine-independent languages.",
    "Alan Turing": "Alan Turing formalised computation with the Turing machine and broke codes at Bletchley.",
}


def test_incremental_ingest_embeds_only_changes(tmp_path: Path, registry: ModelRegistry) -> None:
    eng = _engine(tmp_path, registry)
    src = _write(tmp_path / "docs.jsonl", DOCS)
    first = eng.corpus.ingest([src])
    assert (first.added, first.embedded_chunks) == (3, first.chunks) and first.chunks >= 3

    again = eng.corpus.ingest([src])
    assert (again.unchanged, again.embedded_chunks, again.chunks) == (3, 0, first.chunks)

    changed = dict(DOCS, **{"Grace Hopper": "Grace Hopper led the team that built the UNIVAC I compiler."})
    del changed["Alan Turing"]
    third = eng.corpus.ingest([_write(src, changed)])
    assert (third.updated, third.unchanged, third.removed, third.added) == (1, 1, 1, 0)
    hopper_chunks = len(_docs(IndexStore(eng.corpus.store.root))["Grace Hopper"].node_ids)
    assert third.embedded_chunks == hopper_chunks

    # A second source is kept when the first is re-synchronised.
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.md").write_text("# Hedy Lamarr\n\nHedy Lamarr co-invented frequency hopping.")
    fourth = eng.corpus.ingest([other])
    assert fourth.documents == 3 and fourth.embedded_chunks >= 1
    assert set(_docs(eng.corpus.store)) == {"Ada Lovelace", "Grace Hopper", "notes.md"}


def test_a_documents_trust_level_reaches_its_passages(tmp_path: Path, registry: ModelRegistry) -> None:
    """Stored with the chunks (never embedded), read back with every generation, and carried by
    the passages retrieved."""
    eng = _engine(tmp_path, registry)
    src = tmp_path / "docs.jsonl"
    rows: list[dict[str, object]] = [{"id": k, "title": k, "text": v} for k, v in DOCS.items()]
    rows[0]["trust"] = 0.9
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    eng.corpus.ingest([src])
    rows[2]["trust"] = 0.2
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    again = eng.corpus.ingest([src])
    assert (again.updated, again.unchanged) == (1, 2)  # only the document whose trust changed
    eng.load(build_index=False)
    found, _ = eng.pipeline.retrieve("Who wrote the first algorithm for the Analytical Engine?", eng.config())
    trust = {p.doc_id: p.trust for p in found}
    assert trust == {"Ada Lovelace": 0.9, "Grace Hopper": None, "Alan Turing": 0.2}
    eng.close()


def test_a_markdown_section_is_its_own_titled_chunk(tmp_path: Path, registry: ModelRegistry) -> None:
    """Two sections of one Markdown file: two chunks, each titled by its heading, both the
    document's (a passage about the tea house was titled "Cafe Aurora" and the diagnosis read
    "Cafe Aurora: ... seats twenty guests")."""
    eng = _engine(tmp_path, registry)
    src = tmp_path / "docs"
    src.mkdir()
    (src / "cafes.md").write_text(
        "# Cafe Aurora\n\nCafe Aurora is a coffee shop in Tromso, Norway.\n\n"
        "# Blue Fern Tea House\n\nBlue Fern Tea House is a tea room in Kyoto. It seats twenty guests.\n"
    )
    eng.corpus.ingest([src])
    nodes = {n.node_id: n for n in eng.corpus.index.open().snapshot.nodes}
    assert list(_docs(eng.corpus.store)["cafes.md"].node_ids) == ["cafes.md#s0.0", "cafes.md#s1.0"]
    assert [n.metadata["title"] for n in nodes.values()] == ["Cafe Aurora", "Blue Fern Tea House"]
    assert {n.metadata["doc_id"] for n in nodes.values()} == {"cafes.md"}
    assert "Kyoto" not in nodes["cafes.md#s0.0"].get_content()


def test_reused_vectors_equal_fresh_ones(tmp_path: Path, registry: ModelRegistry) -> None:
    """Unchanged documents keep their vectors: identical to what a full rebuild computes."""
    eng = _engine(tmp_path, registry)
    src = _write(tmp_path / "docs.jsonl", DOCS)
    eng.corpus.ingest([src])
    eng.corpus.ingest(
        [_write(src, dict(DOCS, **{"Alan Turing": "Alan Turing proposed the imitation game."}))]
    )
    incremental = eng.corpus.store.load()
    eng.corpus.ingest([src], rebuild=True)
    eng.corpus.ingest(
        [_write(src, dict(DOCS, **{"Alan Turing": "Alan Turing proposed the imitation game."}))], rebuild=True
    )
    rebuilt = eng.corpus.store.load()
    a = {n.node_id: incremental.matrix[i] for i, n in enumerate(incremental.nodes)}
    b = {n.node_id: rebuilt.matrix[i] for i, n in enumerate(rebuilt.nodes)}
    assert a.keys() == b.keys()
    for nid in a:
        assert float(a[nid] @ b[nid]) == pytest.approx(1.0, abs=1e-4)


def test_bad_input_writes_nothing(tmp_path: Path, registry: ModelRegistry) -> None:
    eng = _engine(tmp_path, registry)
    eng.corpus.ingest([_write(tmp_path / "docs.jsonl", DOCS)])
    before = eng.corpus.store.current_generation()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "ok.txt").write_text("fine")
    (bad / "broken.txt").write_bytes(b"\xff\xfe\xfa")
    with pytest.raises(InputError, match="UTF-8"):
        eng.corpus.ingest([tmp_path / "docs.jsonl", bad])
    with pytest.raises(InputError, match="does not exist"):
        eng.corpus.ingest([tmp_path / "missing"])
    assert eng.corpus.store.current_generation() == before
    assert not list(eng.corpus.store.root.glob(".build-*"))


def test_failure_before_the_swap_keeps_the_old_index(
    tmp_path: Path, registry: ModelRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    eng = _engine(tmp_path, registry)
    src = _write(tmp_path / "docs.jsonl", DOCS)
    eng.corpus.ingest([src])
    before = eng.corpus.store.current_generation()

    def crash(self: IndexStore, gen: str) -> None:
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(IndexStore, "_point_current_at", crash)
    with pytest.raises(OSError, match="simulated"):
        eng.corpus.ingest([_write(src, {"New": "Something new entirely."})])
    monkeypatch.undo()
    assert eng.corpus.store.current_generation() == before
    assert set(eng.corpus.store.load().manifest.docs) == set(DOCS)


KILL_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from ragmend.engine import Engine
    from tests.conftest import tiny_settings

    data_dir, src, marker = map(Path, sys.argv[1:4])
    engine = Engine(tiny_settings(data_dir))

    def progress(done, total):
        marker.write_text(f"{done}/{total}")
        time.sleep(0.5)  # slow enough for the parent to kill us mid-embedding

    engine.corpus.ingest([src], progress=progress)
    """
)


@pytest.mark.slow
def test_killed_ingest_leaves_previous_index(
    tmp_path: Path, registry: ModelRegistry, small_corpus: Path
) -> None:
    eng = _engine(tmp_path, registry)
    eng.corpus.ingest([_write(tmp_path / "docs.jsonl", DOCS)])
    before = eng.corpus.store.current_generation()
    n_before = len(eng.corpus.store.load().nodes)

    marker = tmp_path / "marker"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, str(tmp_path), str(small_corpus), str(marker)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 240
    while not marker.exists():
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
        assert time.monotonic() < deadline, "ingest never started embedding"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    assert eng.corpus.store.current_generation() == before
    snapshot = eng.corpus.store.load()
    assert len(snapshot.nodes) == n_before and set(snapshot.manifest.docs) == set(DOCS)
    # The next writer clears what the dead one left and succeeds.
    report = eng.corpus.ingest([small_corpus])
    assert report.generation != before
    assert not list(eng.corpus.store.root.glob(".build-*"))


def test_length_sorted_embedding_keeps_node_order(tmp_path: Path, registry: ModelRegistry) -> None:
    from ragmend.rag.documents import SourceDocument

    ingestor = _engine(tmp_path, registry).corpus.ingestor()
    docs = [
        SourceDocument(id=k, title=k, text=v * (i + 1), source="t") for i, (k, v) in enumerate(DOCS.items())
    ]
    nodes = ingestor.chunk(docs)
    assert len({len(n.text) for n in nodes}) > 1  # lengths differ, so the sort reorders
    natural = ingestor.embed(nodes, length_sorted=False)
    ordered = ingestor.embed(nodes, length_sorted=True)
    for a, b in zip(natural, ordered, strict=True):
        assert float(a @ b) == pytest.approx(1.0, abs=1e-4)


def test_a_running_engine_picks_up_another_process_ingest(tmp_path: Path, registry: ModelRegistry) -> None:
    serving = _engine(tmp_path, registry)
    src = _write(tmp_path / "docs.jsonl", DOCS)
    serving.corpus.ingest([src])
    serving.corpus.index.open()
    before = serving.corpus.index.snapshot.generation
    # A second engine on the same data directory stands in for `ragmend ingest` in another process.
    other = _engine(tmp_path, registry)
    more = {"Hedy Lamarr": "Hedy Lamarr co-invented frequency hopping."}
    other.corpus.ingest([_write(tmp_path / "more.jsonl", more)])
    assert serving.corpus.index.snapshot.generation == before
    assert serving.corpus.index.reload_if_changed() is True
    assert serving.corpus.index.snapshot.generation != before
    assert "Hedy Lamarr" in serving.corpus.index.snapshot.manifest.docs
    assert serving.corpus.index.reload_if_changed() is False


def test_a_document_moved_to_another_source_follows_it(tmp_path: Path, registry: ModelRegistry) -> None:
    eng = _engine(tmp_path, registry)
    a = _write(tmp_path / "a.jsonl", DOCS)
    b = _write(tmp_path / "b.jsonl", {"Ada Lovelace": DOCS["Ada Lovelace"]})
    eng.corpus.ingest([a])
    moved = eng.corpus.ingest([b])
    assert moved.unchanged == 1 and moved.embedded_chunks == 0
    # Re-syncing a without Ada must not remove her: she now belongs to b.
    eng.corpus.ingest([_write(a, {k: v for k, v in DOCS.items() if k != "Ada Lovelace"})])
    assert "Ada Lovelace" in _docs(eng.corpus.store)
