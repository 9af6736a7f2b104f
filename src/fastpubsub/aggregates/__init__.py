"""Aggregate subscriptions over tables (Chandramouli, Xie, Yang, SIGMOD 2006): range min/max via
Mar-based reformulation, count/sum/avg, DISTINCT and select-join.  No Kafka here."""

from .reformulator import BAD, GOOD, IGNORABLE, ExtremumReformulator, Reformulation
from .service import AggregateService, Notification, Output, ReformulatedRecord, TableSchema
from .spec import AggregateSpec, JoinSpec, spec_from_json
from .table import Table, TableChange
from .text import parse_subscription

__all__ = [
    "AggregateService", "AggregateSpec", "BAD", "ExtremumReformulator", "GOOD", "IGNORABLE", "JoinSpec",
    "Notification", "Output", "ReformulatedRecord", "Reformulation", "Table", "TableChange", "TableSchema",
    "parse_subscription", "spec_from_json",
]
