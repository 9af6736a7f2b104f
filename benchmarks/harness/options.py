"""Command-line option types the benchmarks share (argparse ``type=``), so that a bad value is refused with the
option's name before anything starts."""

from __future__ import annotations

import argparse


def positive(text: str) -> int:
    """A whole number of at least 1: a count of records, subscriptions, rounds or repetitions."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not positive")
    return value
