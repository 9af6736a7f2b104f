"""The matching kernels the algorithms share: the cluster scan (``scan``), static and dynamic's staged
conjunction probes (``probing``), the per-batch event loops (``batch``) and the sort of an event's ids (``sorting``)."""
