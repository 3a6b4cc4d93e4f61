"""``bayes-eval subsampled``: measures from subsampled data (seed 004) — being built (issue 18)."""
from __future__ import annotations


def add_subsampled_parser(subparsers):
    """Register ``subsampled`` on the ``bayes-eval`` parser."""
    subparsers.add_parser("subsampled", help="measures from data whose negatives were subsampled (seed 004; being built)")


def cmd_subsampled(args) -> int:
    raise NotImplementedError("bayes-eval subsampled is being built (issue 18)")
