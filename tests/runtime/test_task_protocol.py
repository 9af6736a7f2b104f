"""The one door between the runtime and a service: ``runtime.task.Task`` is exactly what the host calls.

Read off the host's source: every name the host takes from its task is declared in the protocol, and every name
the protocol declares is taken by the host (nothing stale on either side); each service's task has every member
with the protocol's parameters; the host forwards nothing to its task; and the lifecycle refuses a step out of order.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from fastpubsub.runtime import host as host_module
from fastpubsub.runtime.host import Host
from fastpubsub.runtime.task import Context, Task, TaskState
from fastpubsub.services.events.processor import EventsTask
from fastpubsub.services.patterns.service import PatternsTask
from fastpubsub.services.tables.service import TablesTask

TASKS = (EventsTask, PatternsTask, TablesTask)


def taken_from_task(source: str) -> set[str]:
    """Names read off ``self.task`` (or a local ``task`` bound to it) in ``source``."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            owner = ast.unparse(node.value)
            if owner in ("self.task", "task"):
                names.add(node.attr)
    return names


def declared() -> set[str]:
    return {n for n in vars(Task) if not n.startswith("_")} | set(Task.__annotations__)


def test_the_protocol_is_exactly_what_the_host_takes_from_its_task():
    taken = taken_from_task(Path(host_module.__file__).read_text())
    assert taken - declared() == set(), "the host calls what the protocol does not declare"
    assert declared() - taken == set(), "the protocol declares what the host never calls"


def test_the_reading_of_the_host_finds_an_undeclared_call():
    """The check above can fail: a host that calls a hook the protocol lacks is caught."""
    taken = taken_from_task("class H:\n    def run(self):\n        task = self.task\n        task.warm_start(self)\n")
    assert taken - declared() == {"warm_start"}


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.__name__)
def test_each_service_task_has_every_member_of_the_protocol_with_its_parameters(task):
    for name in sorted(declared()):
        assert hasattr(task, name), f"{task.__name__} lacks {name}"
        member = getattr(Task, name, None)
        if callable(member):
            want = list(inspect.signature(member).parameters)
            got = list(inspect.signature(getattr(task, name)).parameters)
            assert got == want, f"{task.__name__}.{name}{got}: the protocol says {want}"


def test_a_task_sees_the_context_and_never_the_host():
    host = Host(TablesTask.__new__(TablesTask), host_module.HostConfig("127.0.0.1:1", "g"))
    with pytest.raises(AttributeError):
        host.subscribers  # noqa: B018 -- the host forwards nothing to its task
    assert isinstance(host.context, Context) and not hasattr(host.context, "task")
    for task in TASKS:
        for hook in ("before_clients", "after_clients", "restore"):
            assert list(inspect.signature(getattr(task, hook)).parameters) == ["self", "ctx"]


def test_the_lifecycle_goes_forward_and_refuses_a_step_out_of_order():
    state = TaskState.CREATED.advance(TaskState.RESTORING).advance(TaskState.RUNNING)
    state = state.advance(TaskState.REWINDING).advance(TaskState.RUNNING).advance(TaskState.CLOSED)
    assert state is TaskState.CLOSED
    with pytest.raises(RuntimeError, match="from created to running"):
        TaskState.CREATED.advance(TaskState.RUNNING)  # ready without a restore
    with pytest.raises(RuntimeError, match="from closed to running"):
        TaskState.CLOSED.advance(TaskState.RUNNING)
