"""How sure `matrix advise` is: an interval over a configuration's repeats whose stated
confidence it has, and whether two configurations are within each other's noise.

A repeat is one cell (its epochs share a process: docs/advise.md), so a configuration of n
repeats has n independent throughputs. Timings are positive and skewed (a slow repeat is
slower by a factor, not by an amount), so both questions are asked of their logarithms:

- interval: Student's t over the repeats' log throughputs, 95%, exponentiated: the
  geometric mean's interval, which never reaches a negative rate. With 2 repeats a t-interval
  needs t = 12.7 and says nothing useful; the answer is "no interval", said so. (The
  bootstrap over 3 repeats, used before, is min to max: about 75% coverage, not 95%.)
- tie: Welch's t on the difference of two configurations' mean log throughputs. Their
  figures (time, or cost: the same ratio times a fixed price ratio) are within the noise
  where the gap between them is inside the 95% interval of that difference. A side of one
  repeat borrows the other's spread; two sides of one repeat each cannot be told apart
  (no tie is claimed, and none is ruled out).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

CONFIDENCE = 0.95
MIN_INTERVAL_REPEATS = 3  # under this: no interval, said so
# Student's t, two-sided 95% (the 0.975 quantile), by degrees of freedom 1..30
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201,
         2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069,
         2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t975(df: float) -> float:
    """The 0.975 quantile of Student's t with `df` degrees of freedom (a fractional df,
    Welch's, rounds down: the wider, safe side); past 30, Cornish-Fisher's first term."""
    whole = max(1, math.floor(df))
    if whole <= len(_T975):
        return _T975[whole - 1]
    z = 1.959964
    return z + (z ** 3 + z) / (4 * whole)


def _log_stats(rates: Sequence[float]) -> tuple[float, float, int]:
    """(mean, variance with n - 1, n) of the log rates; variance NaN under 2."""
    logs = [math.log(r) for r in rates]
    n = len(logs)
    mean = sum(logs) / n
    var = sum((x - mean) ** 2 for x in logs) / (n - 1) if n > 1 else float("nan")
    return mean, var, n


def interval(rates: Sequence[float]) -> tuple[float, float] | None:
    """The 95% t-interval of a configuration's throughput over its repeats (module
    docstring); None under MIN_INTERVAL_REPEATS repeats."""
    if len(rates) < MIN_INTERVAL_REPEATS:
        return None
    mean, var, n = _log_stats(rates)
    half = t975(n - 1) * math.sqrt(var / n)
    return math.exp(mean - half), math.exp(mean + half)


def noise(a: Sequence[float], b: Sequence[float]) -> float | None:
    """The half-width, in log units, of the 95% interval of the difference between two
    configurations' mean log throughputs (Welch); None where neither side has 2 repeats."""
    _, var_a, n_a = _log_stats(a)
    _, var_b, n_b = _log_stats(b)
    if n_a < 2 and n_b < 2:
        return None
    var_a = var_b if n_a < 2 else var_a
    var_b = var_a if n_b < 2 else var_b
    parts = (var_a / n_a, var_b / n_b)
    se2 = sum(parts)
    if se2 == 0:
        return 0.0
    dfs = [n - 1 for n in (n_a, n_b) if n >= 2]
    if n_a >= 2 and n_b >= 2:
        df = se2 ** 2 / sum(p ** 2 / (n - 1) for p, n in zip(parts, (n_a, n_b), strict=True)
                            if p > 0)
    else:
        df = float(dfs[0])
    return t975(df) * math.sqrt(se2)


def within_noise(a: Sequence[float], b: Sequence[float], gap: float) -> bool:
    """Whether figures of two configurations `gap` apart (a ratio) are within their repeats'
    noise (module docstring)."""
    half = noise(a, b)
    return half is not None and abs(math.log(gap)) <= half
