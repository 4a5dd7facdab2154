"""The HTTP interface, against a live server on 127.0.0.1: authentication, bad requests (each a
clear 4xx with nothing spent), answers that round-trip to a local session's release, ledger
entries before answers, a client that disconnects, no stack traces."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

from dpcurator import BudgetExceededError, QueryError
from dpcurator.client import (
    FAILED_TEXT,
    INTERNAL_TEXT,
    AuthenticationError,
    Client,
    ConnectionFailedError,
    PermissionDeniedError,
    RateLimitedError,
)
from dpcurator.curator import QueryRelease
from dpcurator.service import STEWARD, ServiceCurator, create_app, load_config

from .conftest import REGIONS, LiveServer, write_config

COUNT = "SELECT region, COUNT(*) AS n FROM people GROUP BY region"
Start = Callable[..., LiveServer]


def _spent(server: LiveServer, analyst: str = "ann", table: str = "people") -> float:
    return server.store.standing(analyst, table)[1].epsilon


def _post(
    server: LiveServer, key: str | None, body: Any, path: str = "/api/v1/query"
) -> httpx.Response:
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(server.url + path, content=content, headers=headers, timeout=60)


def _refused(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "message"} and body["message"]
    assert "Traceback" not in response.text and 'File "' not in response.text
    return body


def test_a_query_returns_the_release_a_local_session_would(live: Start) -> None:
    server = live(analysts={"ann": {"people": 2.0}})
    with Client(server.url, server.key("ann")) as client:
        release = client.sql(COUNT, epsilon=0.5)
    assert isinstance(release, QueryRelease)
    assert release.table["region"].tolist() == list(REGIONS)  # the declared domain order
    assert list(release.table.columns) == ["region", "n", "n_std", "n_ci_low", "n_ci_high"]
    assert release.charged.epsilon == 0.5 and release.remaining.epsilon == 1.5
    stored = server.store.history("ann")
    assert [r.id for r in stored] == [release.entry_id] and stored[0].answered


def test_unknown_malformed_missing_and_revoked_keys_are_refused(live: Start) -> None:
    server = live(analysts={"ann": {"people": 2.0}})
    key = server.key("ann")
    body = {"query": COUNT, "epsilon": 0.5}
    forged = key[:-4] + ("AAAA" if not key.endswith("AAAA") else "BBBB")
    for bad in (None, "nonsense", forged, "dpk_000000000000_" + "A" * 43):
        _refused(_post(server, bad, body), 401)
    server.store.revoke_key(key.split("_")[1], actor="test")
    _refused(_post(server, key, body), 401)
    assert _spent(server) == 0.0
    with Client(server.url, key) as client, pytest.raises(AuthenticationError):
        client.tables()


def test_the_key_is_checked_before_the_body_is_read_as_json(live: Start) -> None:
    server = live(analysts={"ann": {"people": 2.0}})
    for path in ("/api/v1/query", "/api/v1/explain"):
        _refused(_post(server, None, b"{not json", path), 401)
        _refused(_post(server, "dpk_000000000000_" + "A" * 43, b"[1, 2]", path), 401)
        _refused(_post(server, server.key("ann"), b"{not json", path), 400)


def test_a_removed_analyst_is_refused_at_once(live: Start) -> None:
    server = live(analysts={"ann": {"people": 2.0}})
    key = server.key("ann")
    assert _post(server, key, {"query": COUNT, "epsilon": 0.1}).status_code == 200
    server.store.remove_analyst("ann", actor="test")
    _refused(_post(server, key, {"query": COUNT, "epsilon": 0.1}), 401)


def test_another_analysts_table_is_forbidden_and_costs_nothing(live: Start) -> None:
    server = live(
        tables={"people": 10.0, "staff": 10.0},
        analysts={"ann": {"people": 2.0}, "bob": {"staff": 2.0}},
    )
    key = server.key("ann")
    body = _refused(_post(server, key, {"query": "SELECT COUNT(*) FROM staff", "epsilon": 1}), 403)
    assert "staff" in body["message"] and "people" in body["message"]
    nested = "SELECT COUNT(*) FROM people WHERE hh IN (SELECT hh FROM staff)"
    _refused(_post(server, key, {"query": nested, "epsilon": 1}), 403)
    with Client(server.url, key) as client:
        assert [t["name"] for t in client.tables()] == ["people"]
        with pytest.raises(PermissionDeniedError):
            client.dummy("staff")
    assert _spent(server) == 0.0 and server.store.standing("bob", "staff")[1].epsilon == 0.0


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"{not json", "JSON"),
        (b"", "JSON"),
        (b"[1, 2]", "object"),
        (json.dumps({"query": COUNT}).encode(), "epsilon"),
        (json.dumps({"query": COUNT, "epsilon": "1"}).encode(), "epsilon"),
        (json.dumps({"query": COUNT, "epsilon": 1, "extra": 1}).encode(), "Unknown"),
        (json.dumps({"query": 42, "epsilon": 1}).encode(), "query"),
        (json.dumps({"query": "x" * 5000, "epsilon": 1}).encode(), "characters"),
        (b'{"query": "SELECT COUNT(*) FROM people", "epsilon": NaN}', "epsilon"),
        (b"[" * 100_000 + b"]" * 100_000, ""),
    ],
)
def test_malformed_requests_get_a_clear_400(live: Start, body: bytes, words: str) -> None:
    server = live(analysts={"ann": {"people": 2.0}}, max_body_bytes=1_000_000)
    answer = _refused(_post(server, server.key("ann"), body), 400)
    assert words in answer["message"]
    assert _spent(server) == 0.0


def test_huge_bodies_are_refused_with_413_declared_or_streamed(live: Start) -> None:
    server = live(analysts={"ann": {"people": 2.0}}, max_body_bytes=4096)
    key = server.key("ann")
    huge = json.dumps({"query": COUNT + " " * 10_000, "epsilon": 1}).encode()
    _refused(_post(server, key, huge), 413)

    def chunks() -> Any:
        for _ in range(100):
            yield b" " * 1024

    streamed = httpx.post(
        server.url + "/api/v1/query",
        content=chunks(),
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    )
    _refused(streamed, 413)
    assert _spent(server) == 0.0


BAD_QUERIES = [
    "SELECT * FROM people",
    "SELECT hh, income FROM people",
    "SELECT COUNT(*) FROM people; DROP TABLE people",
    "SELECT MAX(income) FROM people",
    "SELECT COUNT(*) FROM people WHERE secret > 1",
    "SELECT COUNT(*), COUNT(*) AS count_std FROM people",
    "SELECT COUNT(*) FROM people TABLESAMPLE 1%",
    "SELECT COUNT(*) FROM people WHERE " + "(" * 200 + "age > 1" + ")" * 200,
    "SELECT COUNT(*) FROM people WHERE " + " OR ".join(["age = 1"] * 300),
    "SELECT region, COUNT(*) FROM people GROUP BY 1e400",
    "SELECT COUNT(*) AS n FROM people ORDER BY 1e400",
    "DELETE FROM people",
    "SELECT (",
]


@pytest.mark.parametrize("query", BAD_QUERIES)
def test_bad_sql_is_a_clear_400_and_nothing_is_spent(live: Start, query: str) -> None:
    server = live(analysts={"ann": {"people": 2.0}})
    answer = _refused(_post(server, server.key("ann"), {"query": query, "epsilon": 0.5}), 400)
    assert answer["error"] in {"QueryError", "InvalidParameterError", "BadRequestError"}
    assert _spent(server) == 0.0 and server.store.history("ann") == []


def test_a_filter_failing_on_one_row_is_answered_not_leaked(live: Start) -> None:
    """The side-channel probe: a CAST that fails on one household's row (TRY semantics)."""
    server = live(analysts={"ann": {"people": 1.0}})
    probe = (
        "SELECT COUNT(*) AS n FROM people WHERE "
        "CASE WHEN hh = 4 THEN CAST(region AS INTEGER) ELSE 0 END = 0"
    )
    response = _post(server, server.key("ann"), {"query": probe, "epsilon": 0.25})
    assert response.status_code == 200 and "release" in response.json()


@pytest.mark.parametrize("epsilon", [0, -1, 1e308, 5e-324])
def test_bad_epsilons_are_refused_and_cost_nothing(live: Start, epsilon: float) -> None:
    server = live(analysts={"ann": {"people": 2.0}})
    _refused(_post(server, server.key("ann"), {"query": COUNT, "epsilon": epsilon}), 400)
    assert _spent(server) == 0.0


def test_over_budget_is_refused_before_reading_for_analyst_and_table(live: Start) -> None:
    server = live(tables={"people": 1.0}, analysts={"ann": {"people": 0.8}, "bob": {"people": 0.8}})
    with Client(server.url, server.key("ann")) as ann, Client(server.url, server.key("bob")) as bob:
        ann.sql(COUNT, epsilon=0.5)
        with pytest.raises(BudgetExceededError, match="Nothing was spent"):
            ann.sql(COUNT, epsilon=0.5)  # the analyst's own budget
        with pytest.raises(BudgetExceededError, match="global budget"):
            bob.sql(COUNT, epsilon=0.6)  # the table's: 0.5 + 0.6 > 1
        bob.sql(COUNT, epsilon=0.5)
    assert server.store.standing(None, "people")[1].epsilon == 1.0
    assert len(server.store.history()) == 2
    assert len(server.store.refusals()) == 2


def test_explain_is_free_and_says_whether_the_query_would_be_answered(live: Start) -> None:
    server = live(analysts={"ann": {"people": 1.0}})
    with Client(server.url, server.key("ann")) as client:
        plan = client.explain("SELECT AVG(income) FROM people", epsilon=0.5)
        assert plan["verdict"]["answered"] and plan["verdict"]["charged"]["epsilon"] == 0.5
        assert all(m["noise_std"] > 0 for m in plan["split"])
        assert not client.explain(COUNT, epsilon=2.0)["verdict"]["answered"]
        with pytest.raises(QueryError):
            client.explain("SELECT * FROM people")
    assert _spent(server) == 0.0


def test_the_dummy_table_follows_the_declaration_and_is_free(live: Start) -> None:
    server = live(analysts={"ann": {"people": 1.0}})
    with Client(server.url, server.key("ann")) as client:
        dummy = client.dummy("people", rows=50)
    assert list(dummy.columns) == ["hh", "region", "income", "age"] and len(dummy) == 50
    assert set(dummy["region"]) <= set(REGIONS)
    assert dummy["income"].between(0, 100_000).all() and dummy["age"].between(0, 100).all()
    assert _spent(server) == 0.0


def test_history_and_budget_show_only_ones_own(live: Start) -> None:
    server = live(analysts={"ann": {"people": 1.0}, "bob": {"people": 1.0}})
    with Client(server.url, server.key("ann")) as ann, Client(server.url, server.key("bob")) as bob:
        ann.sql(COUNT, epsilon=0.25)
        bob.sql(COUNT, epsilon=0.5)
        assert [e["analyst"] for e in ann.history()] == ["ann"]
        mine = ann.budget()["tables"][0]
        assert mine["spent"]["epsilon"] == 0.25 and mine["table_remaining"]["epsilon"] == 99.25
    with Client(server.url, server.key(STEWARD)) as steward:
        assert sorted(e["analyst"] for e in steward.history()) == ["ann", "bob"]
        with pytest.raises(PermissionDeniedError):
            steward.sql(COUNT, epsilon=0.1)


def test_a_repeated_request_id_is_charged_once_with_the_same_answer(live: Start) -> None:
    server = live(analysts={"ann": {"people": 1.0}})
    with Client(server.url, server.key("ann")) as client:
        first = client.sql(COUNT, epsilon=0.25, request_id="r-1")
        again = client.sql(COUNT, epsilon=0.25, request_id="r-1")
        pd.testing.assert_frame_equal(first.table, again.table)
        with pytest.raises(Exception, match="another query"):
            client.sql(COUNT, epsilon=0.5, request_id="r-1")
    assert _spent(server) == 0.25 and len(server.store.history("ann")) == 1


def test_a_failure_after_reading_is_charged_and_one_fixed_text(live: Start) -> None:
    server = live(analysts={"ann": {"people": 1.0}})
    key = server.key("ann")
    # The data disappears after the server planned its declaration: the read fails.
    source = server.curator.config.table("people").table.source
    with open(source) as handle:
        saved = handle.read()
    with open(source, "w") as handle:
        handle.write("hh,region,income,age\n1,north,not-a-number,x\n")
    try:
        response = _post(server, key, {"query": "SELECT AVG(income) FROM people", "epsilon": 0.25})
    finally:
        with open(source, "w") as handle:
            handle.write(saved)
    assert response.status_code == 500 and response.json()["message"] == FAILED_TEXT
    assert "Traceback" not in response.text and "income" not in response.json()["message"]
    assert _spent(server) == 0.25  # charged before it read: nothing is refunded


def test_the_rate_limit_is_per_key_with_retry_after(live: Start) -> None:
    server = live(analysts={"ann": {"people": 1.0}, "bob": {"people": 1.0}}, rate_per_minute=3)
    ann, bob = server.key("ann"), server.key("bob")
    headers = {"Authorization": f"Bearer {ann}"}
    codes = [httpx.get(server.url + "/api/v1/me", headers=headers).status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    limited = httpx.get(server.url + "/api/v1/me", headers=headers)
    assert int(limited.headers["retry-after"]) >= 1
    _refused(limited, 429)
    assert httpx.get(
        server.url + "/api/v1/me", headers={"Authorization": f"Bearer {bob}"}
    ).is_success
    with Client(server.url, ann, retries=0) as client, pytest.raises(RateLimitedError):
        client.budget()


def test_requests_without_a_valid_key_are_limited_per_address(live: Start) -> None:
    server = live(analysts={"ann": {"people": 1.0}}, rate_per_minute=3)
    made_up = "dpk_0123456789ab_" + "A" * 43  # well formed, unknown: no scrypt, a failure
    codes = [httpx.get(server.url + "/api/v1/me").status_code for _ in range(2)]
    codes.append(
        httpx.get(
            server.url + "/api/v1/me", headers={"Authorization": f"Bearer {made_up}"}
        ).status_code
    )
    assert codes == [401, 401, 401]
    # Three failures from 127.0.0.1 used its bucket: keyless, made-up and real keys now wait.
    _refused(httpx.get(server.url + "/api/v1/me"), 429)
    other = "dpk_ba9876543210_" + "B" * 43
    _refused(
        httpx.get(server.url + "/api/v1/me", headers={"Authorization": f"Bearer {other}"}), 429
    )
    ann = httpx.get(
        server.url + "/api/v1/me", headers={"Authorization": f"Bearer {server.key('ann')}"}
    )
    _refused(ann, 429)


def _most_at_once(server: LiveServer, requests: int) -> int:
    """Send ``requests`` at once; return how many the server worked on at the same time."""
    inside, most, lock = 0, 0, threading.Lock()
    standing = server.curator.standing

    def slow_standing(who: Any) -> dict[str, Any]:
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
        time.sleep(0.3)  # long enough for the others to arrive; the count is what is checked
        with lock:
            inside -= 1
        return standing(who)

    server.curator.standing = slow_standing  # type: ignore[method-assign]
    key = server.key("ann")
    with ThreadPoolExecutor(requests) as pool:
        codes = list(
            pool.map(
                lambda _: (
                    httpx.get(
                        server.url + "/api/v1/me",
                        headers={"Authorization": f"Bearer {key}"},
                        timeout=60,
                    ).status_code
                ),
                range(requests),
            )
        )
    assert codes == [200] * requests
    return most


def test_requests_worked_on_at_once_are_limited_per_process(live: Start) -> None:
    limited = live(analysts={"ann": {"people": 2.0}}, concurrent_requests=2)
    assert _most_at_once(limited, 6) == 2
    wide = live(analysts={"ann": {"people": 2.0}}, concurrent_requests=6)
    assert _most_at_once(wide, 6) > 2  # control: the limit, not the test, held them back


def test_unknown_paths_and_methods_are_json_4xx(live: Start) -> None:
    server = live(analysts={"ann": {"people": 1.0}})
    _refused(httpx.get(server.url + "/nope"), 404)
    response = httpx.get(server.url + "/api/v1/query")
    assert response.status_code == 405 and "Traceback" not in response.text


def test_a_client_that_disconnects_is_still_charged(live: Start) -> None:
    server = live(analysts={"ann": {"people": 1.0}}, min_response_ms=2000)
    key = server.key("ann")
    body = json.dumps({"query": COUNT, "epsilon": 0.25, "request_id": "gone"}).encode()
    request = (
        f"POST /api/v1/query HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(request)
    deadline = time.monotonic() + 60  # bounded: the charge lands within the query's time
    while not server.store.history("ann") and time.monotonic() < deadline:
        time.sleep(0.05)
    entries = server.store.history("ann")
    assert len(entries) == 1 and entries[0].charged.epsilon == 0.25
    while not server.store.history("ann")[0].answered and time.monotonic() < deadline:
        time.sleep(0.05)
    with Client(server.url, key) as client:  # the same request id: its stored answer, once
        release = client.sql(COUNT, epsilon=0.25, request_id="gone")
    assert release.entry_id == entries[0].id and _spent(server) == 0.25


def test_bad_query_parameters_and_internal_errors_carry_no_trace(
    live: Start, caplog: pytest.LogCaptureFixture
) -> None:
    server = live(analysts={"ann": {"people": 1.0}})
    headers = {"Authorization": f"Bearer {server.key('ann')}"}
    bad = httpx.get(server.url + "/api/v1/tables/people/dummy?rows=many", headers=headers)
    assert "rows" in _refused(bad, 400)["message"]
    _refused(httpx.get(server.url + "/api/v1/tables/people/dummy?rows=0", headers=headers), 400)
    _refused(httpx.get(server.url + "/api/v1/tables/no%20such/dummy", headers=headers), 400)
    server.store.close()  # the store's connection is gone: an unexpected failure
    with caplog.at_level(logging.ERROR, logger="dpcurator.service"):
        broken = httpx.get(server.url + "/api/v1/me", headers=headers)
    assert broken.status_code == 500 and broken.json()["message"] == INTERNAL_TEXT
    assert "Traceback" not in broken.text and "sqlite" not in broken.text.lower()
    # the steward's log has what happened, with its trace
    logged = [r for r in caplog.records if r.name == "dpcurator.service"]
    assert logged and logged[0].exc_info is not None and "/api/v1/me" in logged[0].getMessage()


def test_tls_through_uvicorns_own_options(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    config = load_config(write_config(tmp_path, analysts={"ann": {"people": 1.0}}))
    server = LiveServer(ServiceCurator(config), tls=(cert, key)).start()
    try:
        assert server.url.startswith("https://")
        with Client(server.url, server.key("ann"), verify=str(cert)) as client:
            assert client.sql(COUNT, epsilon=0.25).charged.epsilon == 0.25
        untrusting = Client(server.url, server.key("ann"), retries=0)
        with untrusting, pytest.raises(ConnectionFailedError):  # a certificate it does not trust
            untrusting.tables()
    finally:
        server.stop()


def test_the_routes_are_the_documented_ones_and_none_runs_sql_without_noise(
    live: Start,
) -> None:
    server = live(analysts={"ann": {"people": 1.0}})
    app = create_app(server.curator)
    routes = {
        (method, route.path)
        for route in app.routes
        for method in getattr(route, "methods", set()) - {"HEAD"}
    }
    assert routes == {
        ("GET", "/healthz"),
        ("GET", "/api/v1/tables"),
        ("GET", "/api/v1/tables/{table}/dummy"),
        ("GET", "/api/v1/me"),
        ("GET", "/api/v1/history"),
        ("POST", "/api/v1/explain"),
        ("POST", "/api/v1/query"),
        ("GET", "/"),
        ("GET", "/login"),
        ("POST", "/login"),
        ("GET", "/logout"),
        ("GET", "/dashboard"),
        ("GET", "/dashboard/data"),
    }
