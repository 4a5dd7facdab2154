"""``dpcurator serve server.toml``: the curator as a service, on uvicorn; and its demo.

The configuration (see :mod:`dpcurator.service._config`) is checked and the ledger store
opened once before the server starts, so that a mistake is reported here and not by each
worker. Each worker process then opens its own sessions and its own connection to the store;
with several workers use PostgreSQL or a SQLite file on a local disk (SQLite's lock serialises
the charges of all workers on one host).

TLS: give ``--ssl-certfile`` and ``--ssl-keyfile`` (uvicorn's own TLS), or keep the server on
127.0.0.1 behind a reverse proxy that terminates TLS (``--proxy-headers`` then trusts its
``X-Forwarded-*`` headers from ``--forwarded-allow-ips``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from dpcurator.cli._progress import Steps
from dpcurator.errors import DPError, InvalidParameterError

__all__ = ["DEMO_OUT", "dashboard_screenshot", "demo_service", "remote_query", "serve"]

console = Console(stderr=True)


def serve(  # noqa: PLR0917 (typer commands take their options as parameters)
    config: Annotated[Path, typer.Argument(help="The server's configuration (server.toml).")],
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8750,
    workers: Annotated[int, typer.Option(help="Server processes (uvicorn workers).")] = 1,
    ssl_certfile: Annotated[
        Path | None, typer.Option(help="TLS certificate (PEM): serve HTTPS.")
    ] = None,
    ssl_keyfile: Annotated[Path | None, typer.Option(help="TLS private key (PEM).")] = None,
    proxy_headers: Annotated[
        bool, typer.Option(help="Trust X-Forwarded-* from --forwarded-allow-ips.")
    ] = False,
    forwarded_allow_ips: Annotated[
        str, typer.Option(help="Proxies whose X-Forwarded-* headers are trusted.")
    ] = "127.0.0.1",
    log_level: Annotated[str, typer.Option(help="uvicorn's log level.")] = "info",
) -> None:
    """Serve the declared tables to analysts over HTTP (the steward's command)."""
    import uvicorn  # noqa: PLC0415 - the 'service' extra

    from dpcurator.service import CONFIG_ENV, LedgerStore, ServiceCurator, load_config  # noqa: PLC0415

    try:
        loaded = load_config(config)
        store = LedgerStore(loaded.ledger, accountant=loaded.accountant)
        ServiceCurator(loaded, store).close()  # checks the tables and seeds the store
    except DPError as exc:
        console.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(code=2) from None
    os.environ[CONFIG_ENV] = str(config.resolve())
    scheme = "https" if ssl_certfile else "http"
    console.print(
        f"dpcurator: serving {', '.join(t.name for t in loaded.tables)} on "
        f"{scheme}://{host}:{port} (ledger: {loaded.ledger.split('@')[-1]}, {workers} worker(s))"
    )
    uvicorn.run(
        "dpcurator.service._app:app_from_environment",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        ssl_certfile=None if ssl_certfile is None else str(ssl_certfile),
        ssl_keyfile=None if ssl_keyfile is None else str(ssl_keyfile),
        proxy_headers=proxy_headers,
        forwarded_allow_ips=forwarded_allow_ips,
        log_level=log_level,
        server_header=False,
        ws="none",  # no websockets: the service speaks plain HTTP
    )


def remote_query(
    server: str,
    key: str | None,
    sql: str,
    *,
    epsilon: float | None,
    delta: float,
    explain: bool,
    as_json: bool,
) -> None:
    """``dpcurator query --server URL --key KEY``: the same query, answered by the service."""
    import json  # noqa: PLC0415

    from dpcurator.cli._query import print_release  # noqa: PLC0415
    from dpcurator.client import Client, release_to_dict  # noqa: PLC0415

    out = Console()
    try:
        if key is None:
            raise InvalidParameterError("--key", None, "is required with --server ($DPCURATOR_KEY)")
        with Client(server, key) as client:
            if explain:
                plan = client.explain(sql, epsilon=1.0 if epsilon is None else epsilon, delta=delta)
                typer.echo(json.dumps(plan, indent=None if as_json else 2))
                return
            if epsilon is None:
                raise InvalidParameterError("--epsilon", None, "is required (or use --explain)")
            release = client.sql(sql, epsilon=epsilon, delta=delta)
    except DPError as exc:
        if as_json:
            typer.echo(json.dumps({"error": str(exc), "type": type(exc).__name__}))
        else:
            console.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(code=2) from None
    if as_json:
        typer.echo(json.dumps(release_to_dict(release)))
        return
    print_release(out, release)
    out.print(f"[dim]server: {escape(server)} (ledger entry {release.entry_id})[/]")


DEMO_OUT = Path("demo-output") / "service"
"""Where ``dpcurator demo-service`` writes its declaration, config, ledger and screenshot."""

_DEMO_QUERIES = (
    ("alice", "SELECT state, COUNT(*) AS tax_units FROM cps GROUP BY state", 0.25),
    (
        "alice",
        "SELECT filing_status, AVG(wages) AS mean_wages FROM cps GROUP BY filing_status",
        0.5,
    ),
    ("bob", "SELECT HISTOGRAM(age_head) FROM cps", 0.25),
    ("bob", "SELECT MEDIAN(wages) AS median_wages FROM cps WHERE age_head >= 65", 0.25),
    ("bob", "SELECT COUNT(*) AS n FROM cps WHERE snap_benefits > 0", 0.25),  # over bob's 0.5
)


def _demo_files(out: Path) -> Path:
    """Write the CPS declaration and a server.toml for two analysts; return the config."""
    from dpcurator.cli._demo import cps_declaration, declaration_toml  # noqa: PLC0415
    from dpcurator.datasets import dataset_path  # noqa: PLC0415

    out.mkdir(parents=True, exist_ok=True)
    source = dataset_path("cps")
    table = cps_declaration(source, source_table=None)
    (out / "cps.toml").write_text(
        declaration_toml(table, source=str(source), comment="The CPS tax units, declared.")
    )
    ledger = out / "service.ledger.sqlite"
    for stale in out.glob("service.ledger.sqlite*"):
        stale.unlink()
    config = out / "server.toml"
    config.write_text(
        "# dpcurator demo-service: one table, two analysts, a global budget for the table.\n"
        f'[server]\nledger = "{ledger.name}"\nmin_response_ms = 100\n\n'
        '[tables.cps]\ndeclaration = "cps.toml"\nbudget = { epsilon = 1.25, delta = 1e-6 }\n\n'
        "[analysts.alice]\nbudgets.cps = { epsilon = 1.0 }\n"
        "[analysts.bob]\nbudgets.cps = { epsilon = 0.5 }\n"
    )
    return config


def dashboard_screenshot(url: str, key: str, path: Path) -> None:
    """Log in to the dashboard with ``key`` in headless chromium and save a screenshot.

    Uses Selenium with the system's chromium and chromedriver (the test extra installs
    Selenium; Debian's packages the browser).

    Raises
    ------
    UnsupportedError
        If Selenium or the browser is missing (the message says what to install).
    """
    import shutil  # noqa: PLC0415

    from dpcurator.errors import UnsupportedError  # noqa: PLC0415

    browser, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    try:
        from selenium import webdriver  # noqa: PLC0415
        from selenium.webdriver.chrome.service import Service  # noqa: PLC0415
        from selenium.webdriver.common.by import By  # noqa: PLC0415
        from selenium.webdriver.support.ui import WebDriverWait  # noqa: PLC0415
    except ImportError:
        raise UnsupportedError("The screenshot needs Selenium: pip install selenium.") from None
    if browser is None or driver_path is None:
        raise UnsupportedError(
            "The screenshot needs chromium: apt-get install chromium chromium-driver."
        )
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1200,1500",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        driver.get(url + "/login")
        driver.find_element(By.ID, "key").send_keys(key)
        driver.find_element(By.ID, "login").click()
        WebDriverWait(driver, 30).until(
            lambda d: d.find_element(By.ID, "live-status").get_attribute("data-state") == "live"
        )
        driver.save_screenshot(str(path))
    finally:
        driver.quit()


def demo_service(
    out: Annotated[Path, typer.Option(help="Folder for the config, ledger, screenshot.")] = (
        DEMO_OUT
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Run the service end to end on the bundled CPS data.

    The steward declares the CPS table, configures two analysts (alice: epsilon 1, bob: 0.5;
    the table: 1.25 for all together), issues their keys and starts the server on 127.0.0.1.
    The analysts list the tables, explain a query (free), ask queries through the client and
    get a dummy table; bob's last query is refused (his budget), and nothing is spent by it.
    The steward then reads the ledger, and the dashboard is written as a screenshot.
    """
    import threading  # noqa: PLC0415
    import time  # noqa: PLC0415

    import uvicorn  # noqa: PLC0415

    from dpcurator.cli._query import print_release  # noqa: PLC0415
    from dpcurator.client import Client  # noqa: PLC0415
    from dpcurator.service import (  # noqa: PLC0415
        STEWARD,
        ServiceCurator,
        create_app,
        load_config,
        wrap,
    )

    out_console = Console(quiet=as_json)
    config = load_config(_demo_files(out))
    curator = ServiceCurator(config)
    keys = {name: curator.store.issue_key(name, actor="demo").text for name in ("alice", "bob")}
    steward = curator.store.issue_key(STEWARD, actor="demo").text
    server = uvicorn.Server(
        uvicorn.Config(
            wrap(create_app(curator), config),
            host="127.0.0.1",
            port=0,
            log_level="warning",
            ws="none",
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started and thread.is_alive():
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    out_console.rule(f"[bold]steward[/]: serving cps on {url}; keys issued to alice and bob")
    summary: dict[str, Any] = {"url": url, "analysts": sorted(keys)}
    try:
        with Steps("demo-service", 3, console=Console(stderr=True), show=not as_json) as steps:
            summary.update(_demo_analysts(out_console, url, keys, print_release, Client))
            steps.done("the analysts' tables, explain, queries and refusal")
            out_console.rule("[bold]steward[/]: the ledger")
            summary["ledger"] = []
            for row in curator.store.history():
                out_console.print(
                    f"#{row.id} {row.analyst:6} ε={row.charged.epsilon:<5g} {escape(row.query)}"
                )
                summary["ledger"].append(
                    {
                        "id": row.id,
                        "analyst": row.analyst,
                        "query": row.query,
                        "charged_epsilon": row.charged.epsilon,
                    }
                )
            summary["refusals"] = []
            for refusal in curator.store.refusals():
                out_console.print(f"[red]refused[/] {refusal.analyst}: {escape(refusal.reason)}")
                summary["refusals"].append({"analyst": refusal.analyst, "reason": refusal.reason})
            steps.done("the steward's ledger")
            shot = out / "dashboard.png"
            try:
                dashboard_screenshot(url, steward, shot)
                out_console.print(f"dashboard screenshot: {shot}")
                summary["screenshot"] = str(shot)
            except DPError as exc:
                out_console.print(f"[yellow]no screenshot:[/] {exc}")
                summary["screenshot"] = None
            steps.done("the dashboard's screenshot")
    finally:
        server.should_exit = True
        thread.join(timeout=30)
    if as_json:
        typer.echo(json.dumps(summary, allow_nan=False, default=str))


def _demo_analysts(
    out: Console, url: str, keys: dict[str, str], print_release: Any, client_class: Any
) -> dict[str, Any]:
    """Play the analysts: tables, explain, queries, a dummy table, a refusal; what they got."""
    from dpcurator.client._wire import release_to_dict  # noqa: PLC0415

    clients = {name: client_class(url, key) for name, key in keys.items()}
    got: dict[str, Any] = {"answers": [], "budgets": {}}
    try:
        tables = clients["alice"].tables()
        out.rule("[bold]alice[/]: tables and their public metadata")
        out.print(", ".join(f"{c['name']}" for c in tables[0]["columns"]))
        plan = clients["alice"].explain(_DEMO_QUERIES[1][1], epsilon=_DEMO_QUERIES[1][2])
        out.print(
            f"explain (free): charged ε={plan['verdict']['charged']['epsilon']}, noise std "
            + ", ".join(f"{m['measurement']}: {m['noise_std']:.3g}" for m in plan["split"])
        )
        out.print("dummy rows (from metadata only):")
        out.print(clients["bob"].dummy("cps", rows=3).to_string())
        got["tables"] = [t["name"] for t in tables]
        got["explain"] = plan
        for name, sql, epsilon in _DEMO_QUERIES:
            out.rule(f"[bold]{name}[/]: {escape(sql)} at ε={epsilon}")
            asked: dict[str, Any] = {"analyst": name, "query": sql, "epsilon": epsilon}
            try:
                release = clients[name].sql(sql, epsilon=epsilon)
                print_release(out, release)
                asked["release"] = release_to_dict(release)
            except DPError as exc:
                out.print(f"[red]refused ({type(exc).__name__}):[/] {escape(str(exc))}")
                asked["refused"] = {"type": type(exc).__name__, "message": str(exc)}
            got["answers"].append(asked)
        for name, client in clients.items():
            left = client.budget()["tables"][0]["remaining"]["epsilon"]
            answers = len(client.history())
            out.print(f"{name}: {answers} answers, ε left {left:g}")
            got["budgets"][name] = {"answers": answers, "epsilon_left": left}
    finally:
        for client in clients.values():
            client.close()
    return got
