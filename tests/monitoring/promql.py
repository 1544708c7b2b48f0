"""The metric names a PromQL expression selects, for checking them against kqueue's registry.

Not a PromQL parser: a lexer good enough for the expressions kqueue ships. Strings, label
matchers (``{...}``), ranges and subquery steps (``[...]``), grouping label lists (``by (...)``,
``on (...)``, ...) and Grafana variables are removed first; what remains that looks like an
identifier and is not a keyword or a function call is a metric name.
"""

from __future__ import annotations

import re

_KEYWORDS = frozenset(
    {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
     "group_left", "group_right", "inf", "nan", "start", "end"}
)
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GRAFANA_VARS = re.compile(r"\$\{[^}]*\}|\$\w+")
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGES = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(
    r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", re.IGNORECASE
)
# Grafana's template-variable query: label_values(metric, label) names one metric.
_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:,[^)]*)?\)\s*$")
_IDENT = re.compile(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?")


def metric_names(expr: str) -> set[str]:
    """The metric names ``expr`` selects."""
    lv = _LABEL_VALUES.match(expr)
    if lv:
        return {lv.group(1)}
    text = _STRINGS.sub(" ", expr)
    text = _GRAFANA_VARS.sub("1", text)
    text = _MATCHERS.sub(" ", text)
    text = _RANGES.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    names: set[str] = set()
    for match in _IDENT.finditer(text):
        name, call = match.group(1), match.group(2)
        if call or name.lower() in _KEYWORDS:
            continue
        names.add(name)
    return names
