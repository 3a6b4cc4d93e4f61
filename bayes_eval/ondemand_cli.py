"""``bayes-eval ondemand``: several systems evaluated on demand (seed 003) — being built (issue 17)."""
from __future__ import annotations


def add_ondemand_parser(subparsers):
    """Register ``ondemand`` on the ``bayes-eval`` parser."""
    subparsers.add_parser("ondemand", help="several systems evaluated on demand (seed 003; being built)")


def cmd_ondemand(args) -> int:
    raise NotImplementedError("bayes-eval ondemand is being built (issue 17)")
