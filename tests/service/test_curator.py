"""The service's curator (src/dpcurator/service/_curator.py) across a crash: a request charged
by a server that died before it stored the answer is answered once when sent again, and never
charged twice; plans are a function of the query (kept), and the analyst's table is found in
the SQL before anything else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpcurator.client import PermissionDeniedError
from dpcurator.service import ServiceCurator, load_config
from dpcurator.service._curator import QueryRequest, parse_request

from .conftest import write_config

COUNT = "SELECT region, COUNT(*) AS n FROM people GROUP BY region"


def test_a_charge_without_an_answer_is_answered_once_when_sent_again(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, analysts={"ann": {"people": 1.0}}))
    first = ServiceCurator(config)
    who = first.store.authenticate(first.store.issue_key("ann", actor="test").text)
    request = QueryRequest(COUNT, 0.25, 0.0, "crash-1")
    plan = first._sessions["people"].plan(COUNT, epsilon=0.25)
    charge = first.store.charge(  # the server charged it ... and died before answering
        "ann",
        "people",
        request_id="crash-1",
        query=COUNT,
        epsilon=0.25,
        delta=0.0,
        events=plan.events,
    )
    first.close()
    again = ServiceCurator(config)  # restarted
    try:
        ok, body = again.query(who, request, "crash-1")
        assert ok and json.loads(body)["release"]["entry_id"] == charge.id
        ok_twice, body_twice = again.query(who, request, "crash-1")
        assert ok_twice and body_twice == body  # the stored answer, not a second one
        history = again.store.history("ann")
        assert len(history) == 1 and history[0].answered
        assert again.store.standing("ann", "people")[1].epsilon == 0.25
    finally:
        again.close()


def test_the_table_is_found_in_the_sql_before_planning(tmp_path: Path) -> None:
    config = load_config(
        write_config(
            tmp_path,
            tables={"people": 5.0, "staff": 5.0},
            analysts={"ann": {"people": 1.0}},
        )
    )
    curator = ServiceCurator(config)
    try:
        who = curator.store.authenticate(curator.store.issue_key("ann", actor="t").text)
        for query in ("SELECT COUNT(*) FROM staff", "SELECT COUNT(*) FROM people JOIN staff"):
            with pytest.raises(PermissionDeniedError):
                curator.explain(who, QueryRequest(query, 1.0, 0.0, None))
        assert curator.store.refusals() == []  # refused before the curator saw it
    finally:
        curator.close()


def test_requests_are_checked_field_by_field() -> None:
    ok = parse_request({"query": COUNT, "epsilon": 1}, max_query_chars=100, needs_epsilon=True)
    assert ok.epsilon == 1.0 and ok.delta == 0.0 and ok.request_id is None
    for body in (
        {"query": COUNT, "epsilon": True},
        {"query": COUNT, "epsilon": 1, "request_id": ""},
        {"query": "x\x00", "epsilon": 1},
        {"query": " ", "epsilon": 1},
    ):
        with pytest.raises(Exception, match="must"):
            parse_request(body, max_query_chars=100, needs_epsilon=True)
