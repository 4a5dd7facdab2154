"""Short ``repr`` and notebook display of the PyTorch trainers (DP-SGD, federated averaging).

Examples
--------
>>> settings = {"model": "Sequential", "max_grad_norm": 1.0}
>>> settings_repr("DPSGD", settings, {"steps": 0})
'DPSGD(model=Sequential, max_grad_norm=1.0, steps=0)'
"""

from __future__ import annotations

from collections.abc import Mapping

from dpcurator._display import html_table

__all__ = ["settings_html", "settings_repr"]

_NAMES = frozenset({"model", "optimizer"})  # shown as the class's name, without quotes


def _value(key: str, value: object) -> str:
    if key in _NAMES:
        return str(value)
    if isinstance(value, float):
        return f"{value:.6g}" if key == "epsilon" else repr(value)
    return repr(value)


def settings_repr(name: str, settings: Mapping[str, object], state: Mapping[str, object]) -> str:
    """Return ``Name(key=value, ...)``: the settings, then what training did so far."""
    fields = {**settings, **state}
    return f"{name}({', '.join(f'{k}={_value(k, v)}' for k, v in fields.items())})"


def settings_html(
    name: str, settings: Mapping[str, object], state: Mapping[str, object], note: str
) -> str:
    """Return an HTML table of the settings and the training state, for notebooks."""
    rows = [[k, _value(k, v)] for k, v in {**settings, **state}.items()]
    return html_table(["setting", "value"], rows, title=name, notes=[note])
