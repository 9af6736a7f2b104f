"""Stateful subscriptions: patterns over event sequences and aggregates over tables, in process and as services."""
