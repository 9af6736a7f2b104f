"""The one service runtime: a host whose single loop runs a task (the event processor, the pattern service or the
table service) between Kafka topics.

The host (``runtime.host``) owns what every service needs and none should write again: start, ready and stop,
the inputs (``runtime.inputs``), the record limits and the dead-letter path of records too large or refused
(``runtime.deliver``), the checkpoint of what is not yet committed (``runtime.checkpoint``), replay after a failed
delivery, fencing, GC freezing (``runtime.gcwatch``), progress lines and ``/metrics`` (``runtime.metrics``).
A task (``runtime.task``) only turns records into outputs and restores its state.
"""
