"""The policy's statistics in a real PostgreSQL (pgserver's, started by the test in a temporary
directory): the versioned schema and `ragmend db`, increments from several processes, replicas
reading each other's updates within the staleness bound, and a writer killed with SIGKILL
losing no acknowledged update.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragmend import pg
from ragmend.engine import Engine
from ragmend.engine.knowledge import KnowledgeGraph
from ragmend.errors import ConfigError, InputError, StoreUnavailable
from ragmend.kg.pggraph import PgGraph
from ragmend.models.registry import ModelRegistry
from ragmend.policy.facade import Policy
from ragmend.policy.pgstore import PostgresStore
from ragmend.rag import pgindex
from ragmend.rag.pgindex import PgIndexStore, PgSnapshot
from ragmend.settings import PolicySettings, load_settings, settings_with
from tests.conftest import new_database, sample_questions

REPO = Path(__file__).resolve().parent.parent
ARMS = ("rerank", "depth", "mode_switch")
CONFIG = PolicySettings(context_dim=0, enabled_actions=ARMS)


def test_the_schema_is_versioned_and_migrates_once(pg_server: object) -> None:
    url = new_database(pg_server)
    with pytest.raises(ConfigError, match="ragmend db migrate"):
        PostgresStore(url)  # a server never migrates on its own
    conn = pg.connect(url)
    assert pg.schema_version(conn) == 0
    results: list[int] = []

    def migrate() -> None:  # two replicas at once: each step is applied once
        c = pg.connect(url)
        results.append(len(pg.migrate(c)))
        c.close()

    threads = [threading.Thread(target=migrate) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Each step under the lock in its own transaction: the two may take turns step by step (one
    # applies 1, the other 3), but every step is applied exactly once between them.
    assert sum(results) == len(pg.MIGRATIONS)
    assert pg.schema_version(conn) == pg.SCHEMA_VERSION and pg.migrate(conn) == []
    conn.execute("UPDATE ragmend_schema SET version = version + 1")
    conn.commit()
    with pytest.raises(ConfigError, match="newer ragmend"):
        PostgresStore(url)
    conn.close()


def test_cli_migrate_status_and_a_database_that_cannot_be_reached(pg_server: object) -> None:
    url = new_database(pg_server)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ragmend.cli", "db", *args], capture_output=True, text=True, timeout=120
        )

    status = cli("status", "--dsn", url)
    assert status.returncode == 2 and "2 (index generations (pgvector))" in " ".join(status.stderr.split())
    migrated = cli("migrate", "--dsn", url)
    assert migrated.returncode == 0, migrated.stderr
    assert json.loads(migrated.stdout)["to"] == pg.SCHEMA_VERSION
    assert json.loads(cli("status", "--dsn", url).stdout)["version"] == pg.SCHEMA_VERSION
    unreachable = cli("status", "--dsn", "postgresql://ragmend:secret@127.0.0.1:1/ragmend")
    assert unreachable.returncode == 3 and "cannot be reached" in " ".join(unreachable.stderr.split())
    assert "secret" not in unreachable.stderr + unreachable.stdout  # the password is never shown
    assert pg.describe("postgresql://u:secret@h/db") == "postgresql://u:***@h/db"


def test_updates_from_several_processes_all_land(dsn: str) -> None:
    """Increments commute: 3 processes x 40 updates of one arm, at once, sum exactly."""
    Policy(CONFIG, PostgresStore(dsn), ARMS).close()  # records the layout
    script = textwrap.dedent(
        f"""
        import numpy as np
        from ragmend.policy.pgstore import PostgresStore
        store = PostgresStore({dsn!r})
        for i in range(40):
            store.apply("rerank", np.ones({_dim()}), 0.5, True)
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script]) for _ in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    store = PostgresStore(dsn)
    arm = store.export_state().arms["rerank"]
    store.close()
    assert arm.pulls == 120 and arm.successes == 120
    assert arm.reward_sum == pytest.approx(60.0) and np.allclose(arm.xtx, 120.0)


def _dim() -> int:
    return Policy.in_memory(ARMS, CONFIG).dim


def test_a_replica_selects_with_what_another_learned_within_the_bound(dsn: str) -> None:
    a = Policy(CONFIG, PostgresStore(dsn), ARMS, max_staleness_s=0.2)
    b = Policy(CONFIG, PostgresStore(dsn), ARMS, max_staleness_s=0.2)
    frozen = Policy(CONFIG, PostgresStore(dsn), ARMS, max_staleness_s=3600)
    x = np.zeros(a.dim)
    for _ in range(5):
        a.update("depth", x, 1.0)
    time.sleep(0.25)
    b.select(x, list(ARMS), seed=1)
    frozen.select(x, list(ARMS), seed=1)
    assert b.stats()["depth"].pulls == 5  # read again: older than the bound
    assert frozen.stats()["depth"].pulls == 0  # within its (long) bound: its own copy
    b.update("depth", x, 1.0)  # b's update merges with a's, nobody's is lost
    assert a.store.export_state().arms["depth"].pulls == 6
    for p in (a, b, frozen):
        p.close()


def test_the_configured_store_is_postgres(dsn: str, tmp_path: Path) -> None:
    settings = load_settings(
        data_dir=tmp_path,
        policy={"enabled_actions": list(ARMS), "context_dim": 0},
        store={"kind": "postgres", "dsn": dsn, "max_staleness_s": 0.5},
    )
    policy = Policy.from_settings(settings, ARMS)
    assert isinstance(policy.store, PostgresStore) and policy.max_staleness_s == 0.5
    policy.close()
    assert not (tmp_path / "policy.sqlite").exists()
    with pytest.raises(Exception, match=r"needs store\.dsn"):
        load_settings(data_dir=tmp_path, store={"kind": "postgres"})


def test_a_writer_killed_with_sigkill_loses_no_acknowledged_update(dsn: str) -> None:
    Policy(CONFIG, PostgresStore(dsn), ARMS).close()
    script = textwrap.dedent(
        f"""
        import sys
        import numpy as np
        from ragmend.policy.pgstore import PostgresStore
        store = PostgresStore({dsn!r})
        n = 0
        while True:
            store.apply("mode_switch", np.ones({_dim()}), 1.0, True)
            n += 1
            print(n, flush=True)  # acknowledged: apply returned
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    acked = 0
    while acked < 60:
        line = proc.stdout.readline()
        assert line, "the writer stopped"
        acked = int(line)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    acked = max([acked, *(int(x) for x in proc.stdout.read().split())])  # lines already written
    store = PostgresStore(dsn)
    pulls = store.export_state().arms["mode_switch"].pulls
    store.close()
    # Every acknowledged update is there; at most one more (committed, killed before it printed).
    assert acked <= pulls <= acked + 1


def test_a_database_that_goes_away_is_a_503_error_not_a_crash(dsn: str) -> None:
    store = PostgresStore(dsn, timeout_s=2)
    Policy(CONFIG, store, ARMS)
    conn = pg.connect(dsn)
    conn.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    conn.commit()
    conn.close()
    with pytest.raises(StoreUnavailable) as e:
        store.apply("rerank", np.zeros(_dim()), 0.1, False)
    assert e.value.http_status == 503
    # The next call reconnects.
    assert store.apply("rerank", np.zeros(_dim()), 0.1, False).pulls == 1
    store.close()


# --- the index in pgvector ---------------------------------------------------------------------


@pytest.fixture
def pg_engine(dsn: str, engine: Engine, tmp_path: Path) -> Iterator[Engine]:
    """The test engine's models and sources over a PostgreSQL index (built by load())."""
    settings = settings_with(engine.settings, data_dir=tmp_path, store={"kind": "postgres", "dsn": dsn})
    eng = Engine(settings, models=ModelRegistry.sharing(engine.models, settings))
    eng.load()
    yield eng


QUERIES = [q["question"] for q in sample_questions()[:4]]


def test_the_index_in_pgvector_retrieves_as_the_file_index(pg_engine: Engine, engine: Engine) -> None:
    snapshot = pg_engine.corpus.index.snapshot
    assert isinstance(snapshot, PgSnapshot) and snapshot.generation == "gen-000001"
    assert len(snapshot.nodes) == len(engine.corpus.index.snapshot.nodes)
    for mode in ("dense", "bm25", "hybrid"):
        for q in QUERIES:
            here = [p.id for p in pg_engine.corpus.index.retriever.retrieve(q, mode, 5)]
            files = [p.id for p in engine.corpus.index.retriever.retrieve(q, mode, 5)]
            # pgvector computes the same cosine distances in float4: the same passages, in order.
            assert here == files, (mode, q)
    # The diagnosis reads the stored vectors of its passages (one query for just those rows).
    ids = [p.id for p in engine.corpus.index.retriever.retrieve(QUERIES[0], "dense", 5)]
    stored, on_files = snapshot.stored_vectors(ids), engine.corpus.index.snapshot.stored_vectors(ids)
    assert stored is not None and on_files is not None
    assert np.allclose(stored, on_files, atol=1e-5)
    assert snapshot.stored_vectors([*ids, "no-such-node"]) is None


def test_dense_retrieval_goes_on_after_the_database_cut_every_connection(pg_engine: Engine, dsn: str) -> None:
    # What a PostgreSQL restart or failover does to the connections the vector store pools.
    before = [p.id for p in pg_engine.corpus.index.retriever.retrieve(QUERIES[0], "dense", 5)]
    conn = pg.connect(dsn)
    conn.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    conn.commit()
    conn.close()
    assert [p.id for p in pg_engine.corpus.index.retriever.retrieve(QUERIES[0], "dense", 5)] == before


def test_dense_retrieval_while_the_database_refuses_connections_is_a_503_then_recovers(
    pg_engine: Engine, dsn: str, pg_server: object
) -> None:
    # What a request meets in the seconds a PostgreSQL restart takes: no connection can be made.
    retriever = pg_engine.corpus.index.retriever
    before = [p.id for p in retriever.retrieve(QUERIES[0], "dense", 5)]
    from psycopg.conninfo import conninfo_to_dict

    name = conninfo_to_dict(dsn)["dbname"]
    admin = pg.connect(pg_server.get_uri())  # type: ignore[attr-defined]
    try:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        with pytest.raises(StoreUnavailable) as e:
            retriever.retrieve(QUERIES[0], "dense", 5)
        assert e.value.http_status == 503 and e.value.retry_after_s
    finally:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        admin.close()
    assert [p.id for p in retriever.retrieve(QUERIES[0], "dense", 5)] == before


def test_a_failed_ingest_leaves_readers_unchanged_and_readers_keep_their_generation(
    pg_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = pg_engine.corpus.store
    assert isinstance(store, PgIndexStore)
    before = pg_engine.corpus.index.snapshot
    q = QUERIES[0]
    seen = [p.id for p in pg_engine.corpus.index.retriever.retrieve(q, "dense", 5)]
    nodes, matrix = list(before.nodes), before.matrix
    assert matrix.shape == (len(nodes), before.manifest.dim)
    # A write that fails part-way (its last row is a NaN vector, which pgvector refuses, after
    # the first batches of 10 went in): nothing becomes current.
    monkeypatch.setattr(pgindex, "BATCH", 10)
    bad = matrix.copy()
    bad[-1, 0] = np.nan
    with store.writer_lock(), pytest.raises(Exception, match="NaN"):
        store.write(before.manifest, nodes, bad)
    with pg.connect(store.dsn) as conn:
        orphans = conn.execute(
            f"SELECT count(*) FROM data_{store.table} WHERE metadata_->>'generation' = '2'"
        )
        assert orphans.fetchone() == (len(nodes) // 10 * 10,)  # written, never made current
    assert store.current_generation() == "gen-000001"
    assert [p.id for p in pg_engine.corpus.index.retriever.retrieve(q, "dense", 5)] == seen
    # Another ingest (only the last document kept): the reader that started on generation 1 keeps
    # reading it; a reload sees generation 2, without the failed writer's rows.
    reader = pg_engine.corpus.index.retriever
    keep = nodes[-1:]
    with store.writer_lock():
        gen = store.write(before.manifest, keep, matrix[-1:])
    assert gen == "gen-000002"
    assert [p.id for p in reader.retrieve(q, "dense", 5)] == seen
    assert pg_engine.corpus.index.reload_if_changed()
    assert [p.id for p in pg_engine.corpus.index.retriever.retrieve(q, "dense", 5)] == [keep[0].node_id]
    with pg.connect(store.dsn) as conn:  # the failed writer's rows went with the next write
        rows = conn.execute(f"SELECT count(*) FROM data_{store.table} WHERE metadata_->>'generation' = '2'")
        assert rows.fetchone() == (1,)


def test_an_ingest_the_database_cuts_off_mid_write_is_a_503_and_the_next_one_writes(
    pg_engine: Engine, dsn: str, pg_server: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PostgreSQL restart while an ingest adds its rows: the writer gets StoreUnavailable (a
    503 with Retry-After, what an index refresh answers), not an unhandled error; nothing becomes
    current, and the next ingest writes."""
    from llama_index.vector_stores.postgres import PGVectorStore
    from psycopg.conninfo import conninfo_to_dict

    store = pg_engine.corpus.store
    assert isinstance(store, PgIndexStore)
    before = pg_engine.corpus.index.snapshot
    nodes, matrix = list(before.nodes), before.matrix
    name = conninfo_to_dict(dsn)["dbname"]
    admin = pg.connect(pg_server.get_uri())  # type: ignore[attr-defined]
    real_add = PGVectorStore.add

    def add_while_restarting(self: PGVectorStore, batch: list[Any], **kw: Any) -> list[str]:
        # The database as a restart leaves it for some seconds: every connection cut, none accepted.
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        return real_add(self, batch, **kw)

    monkeypatch.setattr(PGVectorStore, "add", add_while_restarting)
    try:
        with pytest.raises(StoreUnavailable) as e:
            store.write(before.manifest, nodes, matrix)
        assert e.value.http_status == 503 and e.value.retry_after_s
    finally:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        admin.close()
    monkeypatch.undo()
    # The store's own connection was cut with the rest: one call answers the 503 a request would
    # get, and the next reconnects.
    with pytest.raises(StoreUnavailable):
        store.current_generation()
    assert store.current_generation() == "gen-000001"
    with store.writer_lock():
        assert store.write(before.manifest, nodes, matrix) == "gen-000002"


def test_the_knowledge_graph_in_postgres_aligns_as_the_sqlite_one(pg_engine: Engine, engine: Engine) -> None:
    """The graph's tables in PostgreSQL: built by the replica's load from its index, the same
    triples and kappa as the file engine's SQLite graph; a second replica reads it without
    extracting anything."""
    assert pg_engine.corpus.kg is not None and engine.corpus.kg is not None
    store = pg_engine.corpus.kg.store
    assert isinstance(store.db, PgGraph) and store.location.endswith("#kg:default")

    def spo(kg: KnowledgeGraph) -> list[tuple[str, str, str, str]]:
        return sorted((t.doc_id, *t.triple.spo) for t in kg.store.triples())

    assert (
        spo(pg_engine.corpus.kg) == spo(engine.corpus.kg) and store.stats() == engine.corpus.kg.store.stats()
    )
    for text in ("Jaws was directed by Steven Spielberg.", "The Conversation was launched in 1990."):
        assert pg_engine.corpus.kg.signal(text).kappa == engine.corpus.kg.signal(text).kappa
    replica = KnowledgeGraph(pg_engine.settings, pg_engine.models)
    report = replica.sync(pg_engine.corpus.index.snapshot)
    assert (report.texts_extracted, report.unchanged) == (0, store.stats().docs)


def test_one_writer_at_a_time_per_namespace(pg_engine: Engine) -> None:
    store = pg_engine.corpus.store
    with store.writer_lock(), pytest.raises(InputError, match="another ingest"), store.writer_lock():
        pass


def test_a_selection_goes_on_with_its_own_copy_when_the_database_is_away(
    dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The refresh before a selection cannot reach the database: the replica selects with the
    statistics it holds (a request is not failed for a read it can do without)."""
    store = PostgresStore(dsn, timeout_s=2)
    policy = Policy(CONFIG, store, ARMS, max_staleness_s=0.0)
    x = np.zeros(policy.dim)
    policy.update("rerank", x, 1.0)
    conn = pg.connect(dsn)
    conn.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    conn.close()
    decision = policy.select(x, list(ARMS), seed=1)  # the refresh fails: no exception
    assert "selecting with this copy" in caplog.text
    assert decision.arm in ARMS and policy.stats()["rerank"].pulls == 1
    policy.close()
