"""Brokers that share one SQL catalog open it at once (a cluster's first start, a broker
restarted while the others open it): every opener ends with the catalog's tables and the
namespace, none fails. pyiceberg checks and then creates, so without iceberg/catalog.py's
mend the losers of the race fail with "table ... already exists" or a UNIQUE constraint
(every round of this test, before it)."""

from __future__ import annotations

import multiprocessing
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

ROUNDS = 4
OPENERS = 3


def open_in_rounds(root: str, barrier: Barrier, answers: Queue[list[str]]) -> None:
    """One opener (a process, as a broker's translation is): in each round, at the same
    instant as the others, open that round's new catalog and create the namespace."""
    from tidelog.iceberg.catalog import InHandSqlCatalog

    failures = []
    for n in range(ROUNDS):
        here = Path(root) / f"round-{n}"
        barrier.wait(60)
        try:
            catalog = InHandSqlCatalog("tidelog", uri=f"sqlite:///{here}/catalog.db",
                                       warehouse=f"file://{here}/warehouse")
            catalog.create_namespace_if_not_exists("kafka")
            if not catalog.namespace_exists("kafka"):
                failures.append(f"round {n}: no namespace")
        except Exception as exc:
            failures.append(f"round {n}: {type(exc).__name__}: {str(exc).splitlines()[0]}")
    answers.put(failures)


def test_openers_of_a_new_catalog_at_once_all_succeed(tmp_path: Path) -> None:
    for n in range(ROUNDS):
        (tmp_path / f"round-{n}" / "warehouse").mkdir(parents=True)
    ctx = multiprocessing.get_context("spawn")
    barrier, answers = ctx.Barrier(OPENERS), ctx.Queue()
    openers = [ctx.Process(target=open_in_rounds, args=(str(tmp_path), barrier, answers))
               for _ in range(OPENERS)]
    for p in openers:
        p.start()
    try:
        failures = [f for _ in openers for f in answers.get(timeout=300)]
    finally:
        for p in openers:
            p.join(60)
            if p.exitcode is None:
                p.kill()
    assert failures == []
