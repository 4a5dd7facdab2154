"""The dashboard: server-rendered HTML, an inline SVG plot of spending, a little JavaScript.

A steward's key shows every table's global budget, every analyst's budget and spending per
table, spending over time, recent queries and refusals, and the audit trail. An analyst's key
shows their own budgets and history only. Every value is escaped; the page loads nothing from
elsewhere. The script refreshes the budget figures every few seconds from ``/dashboard/data``
and marks the page live; without JavaScript the page is complete, only static.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from html import escape
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dpcurator.service._curator import ServiceCurator
    from dpcurator.service._store import Identity

__all__ = ["COOKIE", "login_page", "render_dashboard", "spending_svg"]

COOKIE = "dpcurator_key"
"""The cookie that holds the key a browser logged in with (HttpOnly, SameSite=Strict)."""

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem;color:#222;max-width:1100px}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}
table{border-collapse:collapse;width:100%;font-size:.9rem}
th,td{border-bottom:1px solid #ddd;padding:.3rem .5rem;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.bar{background:#eee;width:160px;height:10px;display:inline-block}
.bar span{background:#3a7;height:10px;display:block}
.muted{color:#777}.refused{color:#a33}code{font-size:.85rem}
"""

_SCRIPT = """
(function(){
  var status=document.getElementById('live-status');
  function fmt(x){return (typeof x==='number')?x.toPrecision(4):String(x);}
  function refresh(){
    fetch('/dashboard/data',{credentials:'same-origin'}).then(function(r){
      if(!r.ok){throw new Error(r.status);} return r.json();
    }).then(function(data){
      data.tables.forEach(function(t){
        var cell=document.querySelector('[data-remaining="'+t.table+'"]');
        if(cell){cell.textContent=fmt(t.remaining.epsilon);}
      });
      status.textContent='live · updated '+new Date().toLocaleTimeString();
      status.dataset.state='live';
    }).catch(function(){status.textContent='offline';status.dataset.state='offline';});
  }
  refresh(); setInterval(refresh, 5000);
})();
"""

_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b")


def _page(title: str, body: str, *, script: bool = True) -> str:
    js = f"<script>{_SCRIPT}</script>" if script else ""
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head>"
        f"<body>{body}{js}</body></html>"
    )


def login_page(message: str = "") -> str:
    """Return the login form: paste an API key (kept in an HttpOnly cookie)."""
    note = f"<p class='refused'>{escape(message)}</p>" if message else ""
    return _page(
        "dpcurator: log in",
        "<h1>dpcurator dashboard</h1>"
        f"{note}<form method='post' action='/login'><label>API key "
        "<input id='key' name='key' type='password' size='64' autocomplete='off'></label> "
        "<button id='login' type='submit'>Log in</button></form>",
        script=False,
    )


def spending_svg(
    points: list[tuple[str, str, float]], *, width: int = 720, height: int = 260
) -> str:
    """Draw an SVG step plot of cumulative epsilon charged over time, one line per series.

    Parameters
    ----------
    points : list of (series, ISO time, epsilon charged)
        Charges, oldest first.

    Examples
    --------
    >>> svg = spending_svg([("ann", "2026-01-01T00:00:00+00:00", 0.5),
    ...                     ("ann", "2026-01-01T00:01:00+00:00", 0.25)])
    >>> svg.startswith("<svg") and "ann" in svg and "polyline" in svg
    True
    """
    if not points:
        return "<p class='muted'>Nothing spent yet.</p>"
    times = [datetime.fromisoformat(t).timestamp() for _, t, _ in points]
    start, end = min(times), max(times)
    span = max(end - start, 1.0)
    series: dict[str, list[tuple[float, float]]] = defaultdict(list)
    totals: dict[str, float] = defaultdict(float)
    for (name, _, eps), moment in zip(points, times, strict=True):
        series[name].append((moment, totals[name]))  # a step: spending jumps at each charge
        totals[name] += eps
        series[name].append((moment, totals[name]))
    top = max(totals.values()) or 1.0
    left, bottom, right, upper = 50, height - 30, width - 150, 15

    def x(moment: float) -> float:
        return left + (moment - start) / span * (right - left)

    def y(value: float) -> float:
        return bottom - value / top * (bottom - upper)

    parts = [
        f"<svg id='spending-plot' xmlns='http://www.w3.org/2000/svg' width='{width}' "
        f"height='{height}' role='img' aria-label='cumulative epsilon spent over time'>",
        f"<line x1='{left}' y1='{bottom}' x2='{right}' y2='{bottom}' stroke='#888'/>",
        f"<line x1='{left}' y1='{upper}' x2='{left}' y2='{bottom}' stroke='#888'/>",
        f"<text x='{left - 5}' y='{upper + 4}' text-anchor='end' font-size='11'>{top:.3g}</text>",
        f"<text x='{left - 5}' y='{bottom}' text-anchor='end' font-size='11'>0</text>",
        f"<text x='{left}' y='{height - 8}' font-size='11'>"
        f"{escape(datetime.fromtimestamp(start).strftime('%H:%M:%S'))}</text>",
        f"<text x='{right}' y='{height - 8}' text-anchor='end' font-size='11'>"
        f"{escape(datetime.fromtimestamp(end).strftime('%H:%M:%S'))}</text>",
    ]
    for i, (name, line) in enumerate(sorted(series.items())):
        colour = _COLOURS[i % len(_COLOURS)]
        coords = " ".join(f"{x(m):.1f},{y(v):.1f}" for m, v in line)
        parts.append(
            f"<polyline class='series' fill='none' stroke='{colour}' stroke-width='2' "
            f"points='{coords}'><title>{escape(name)}: ε={totals[name]:.4g}</title></polyline>"
        )
        parts.append(
            f"<text x='{right + 8}' y='{upper + 14 * (i + 1)}' font-size='12' fill='{colour}'>"
            f"{escape(name)} ({totals[name]:.3g})</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _bar(spent: float, budget: float) -> str:
    share = 0.0 if budget <= 0 else min(1.0, spent / budget)
    return f"<span class='bar'><span style='width:{100 * share:.0f}%'></span></span>"


def _budget_rows(standing: dict[str, Any]) -> str:
    rows = []
    for t in standing["tables"]:
        name = escape(t["table"])
        spent, budget = t["spent"]["epsilon"], t["budget"]["epsilon"]
        rows.append(
            f"<tr><td>{name}</td><td class='num'>{budget:.4g}</td><td class='num'>{spent:.4g}"
            f"</td><td class='num' data-remaining='{name}'>{t['remaining']['epsilon']:.4g}</td>"
            f"<td>{_bar(spent, budget)}</td><td class='num'>"
            f"{t['table_remaining']['epsilon']:.4g} of {t['table_budget']['epsilon']:.4g}</td></tr>"
        )
    return (
        "<table id='budgets'><tr><th>table</th><th>budget ε</th><th>spent ε</th>"
        "<th>remaining ε</th><th></th><th>table's global ε left</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _analyst_rows(curator: ServiceCurator) -> str:
    store = curator.store
    rows = []
    for name, active in store.analysts():
        for table in store.grants(name):
            budget, spent, remaining = store.standing(name, table)
            state = "" if active else " <span class='muted'>(removed)</span>"
            rows.append(
                f"<tr><td>{escape(name)}{state}</td><td>{escape(table)}</td>"
                f"<td class='num'>{budget.epsilon:.4g}</td><td class='num'>{spent.epsilon:.4g}</td>"
                f"<td class='num'>{remaining.epsilon:.4g}</td>"
                f"<td>{_bar(spent.epsilon, budget.epsilon)}</td></tr>"
            )
    return (
        "<table id='analysts'><tr><th>analyst</th><th>table</th><th>budget ε</th>"
        "<th>spent ε</th><th>remaining ε</th><th></th></tr>" + "".join(rows) + "</table>"
    )


def _history_rows(entries: list[dict[str, Any]], *, analyst_column: bool) -> str:
    head = "<th>analyst</th>" if analyst_column else ""
    rows = []
    for e in entries[:25]:
        who = f"<td>{escape(e['analyst'])}</td>" if analyst_column else ""
        rows.append(
            f"<tr><td class='num'>{e['id']}</td><td>{escape(e['time'][:19])}</td>{who}"
            f"<td>{escape(e['table'])}</td><td><code>{escape(e['query'])}</code></td>"
            f"<td class='num'>{e['charged']['epsilon']:.4g}</td></tr>"
        )
    return (
        f"<table id='history'><tr><th>#</th><th>time (UTC)</th>{head}<th>table</th>"
        "<th>query</th><th>charged ε</th></tr>" + "".join(rows) + "</table>"
    )


def render_dashboard(curator: ServiceCurator, who: Identity) -> str:
    """Render the dashboard page for ``who`` (a steward sees everything, an analyst their own)."""
    standing = curator.standing(who)
    entries = curator.history(who, limit=2000)
    series = [
        (
            f"{e['analyst']}/{e['table']}" if who.is_steward else e["table"],
            e["time"],
            float(e["charged"]["epsilon"]),
        )
        for e in reversed(entries)
    ]
    role = "steward" if who.is_steward else f"analyst {who.owner}"
    body = [
        f"<h1>dpcurator · {escape(role)}</h1>",
        "<p><span id='live-status' data-state='static'>static</span> · "
        "<a href='/logout'>log out</a></p>",
        "<h2>Budgets</h2>",
        _budget_rows(standing),
    ]
    if who.is_steward:
        body += ["<h2>Analysts</h2>", _analyst_rows(curator)]
    body += ["<h2>Spending over time</h2>", spending_svg(series)]
    body += ["<h2>Recent queries</h2>", _history_rows(entries, analyst_column=who.is_steward)]
    if who.is_steward:
        refusals = curator.store.refusals(limit=25)
        body.append(
            "<h2>Recent refusals</h2><table id='refusals'><tr><th>time</th>"
            "<th>analyst</th><th>query</th><th>why</th></tr>"
        )
        body += [
            f"<tr><td>{escape(r.time[:19])}</td><td>{escape(r.analyst)}</td>"
            f"<td><code>{escape(r.query)}</code></td><td class='refused'>{escape(r.reason)}"
            "</td></tr>"
            for r in refusals
        ]
        body.append("</table><h2>Audit trail</h2><table id='audit'>")
        body += [
            f"<tr><td>{escape(a.time[:19])}</td><td>{escape(a.actor)}</td>"
            f"<td>{escape(a.action)}</td><td>{escape(a.detail)}</td></tr>"
            for a in curator.store.audit(limit=25)
        ]
        body.append("</table>")
    return _page(f"dpcurator · {role}", "".join(body))
