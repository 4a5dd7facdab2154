"""How a frequency estimate shows itself: a short repr, and HTML for notebooks."""

from __future__ import annotations

import numpy as np

from dpcurator._display import MAX_ROWS
from dpcurator.local import FrequencyEstimate, GeneralizedRandomizedResponse
from dpcurator.noise import InsecureSeededSource


def _estimate(domain_size: int = 8) -> FrequencyEstimate:
    oracle = GeneralizedRandomizedResponse(epsilon=1.0, domain_size=domain_size)
    values = np.arange(2000) % domain_size
    reports = oracle.privatize(values, source=InsecureSeededSource(0))
    return oracle.aggregate(reports)


def test_repr_is_short() -> None:
    estimate = _estimate()
    text = repr(estimate)
    head = ", ".join(f"{c:.4g}" for c in estimate.counts[:5])
    assert text == f"FrequencyEstimate(n=2000, domain_size=8, counts=[{head}, …])"


def test_html_has_a_row_per_value_with_count_std_and_interval() -> None:
    estimate = _estimate()
    page = estimate._repr_html_()
    assert page.count("<tr>") == 1 + 8
    low, high = estimate.confidence_interval(0.95)
    first = f"<td>0</td><td>{estimate.counts[0]:,.1f} ± {estimate.std[0]:,.1f}</td>"
    assert first in page
    assert f"<td>[{low[0]:,.1f}, {high[0]:,.1f}]</td>" in page
    assert "2,000 reports" in page and "normal approximation at 95%" in page


def test_html_of_a_large_domain_says_what_it_left_out() -> None:
    estimate = _estimate(domain_size=MAX_ROWS + 10)
    page = estimate._repr_html_()
    assert page.count("<tr>") == 1 + MAX_ROWS
    assert f"showing the first {MAX_ROWS} of {MAX_ROWS + 10} rows" in page
