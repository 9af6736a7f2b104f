"""The one service runtime: a host whose single loop runs a task (the event processor, the pattern service or the
table service) between Kafka topics.

The host (``runtime.host``) owns what every service needs and none should write again: start, ready and stop,
the inputs (``runtime.inputs``), the record limits and the dead-letter path of records too large or refused
(``runtime.sink``), the checkpoint of what is not yet committed (``runtime.checkpoint``), replay after a failed
delivery, fencing, GC freezing (``runtime.gcwatch``), progress lines and ``/metrics`` (``runtime.metrics``).
A task (``runtime.task``) only turns records into outputs and restores its state, through the context it is given.

What this package exports is its public API: the services, the command line and the statistics job import these
names from ``fastpubsub.runtime`` and none of its modules (an import-linter contract in pyproject.toml).
"""

from .atomic_file import write_atomically
from .changelog import Restored, restore_changelog
from .checkpoint import MAX_COMMIT_INTERVAL_MS, too_large
from .compiles import CompileWatch
from .config import HostConfig
from .counters import PipelineCounters
from .handoff import Handoff
from .host import Host
from .inputs import StaleSnapshot, event_id, event_time, has_data
from .metrics import DEFAULT_STALL_SECONDS, MetricsServer
from .progress import RateMeter, human
from .sink import Output, Reject, Rejected, SourceRecord
from .task import Context, Outputs, Task, TaskBase, TaskState, Topics

__all__ = [
    # the host and the door between it and a task
    "Host", "HostConfig", "Task", "TaskBase", "TaskState", "Context", "Topics", "Outputs",
    # what a task hands back, and reads off input records
    "Output", "Rejected", "Reject", "SourceRecord", "StaleSnapshot", "event_id", "event_time", "has_data", "too_large",
    # a state restored from its changelog, once for every task that keeps one
    "restore_changelog", "Restored",
    # pieces a task's own stages use
    "PipelineCounters", "Handoff", "CompileWatch", "RateMeter", "human", "write_atomically",
    # the command line's
    "DEFAULT_STALL_SECONDS", "MAX_COMMIT_INTERVAL_MS", "MetricsServer",
]
