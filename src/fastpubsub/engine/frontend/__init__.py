"""Subscriptions and events made into what the kernels index: every operator lowered to the six comparisons
(``lowering``), every name and value encoded as an integer or a float (``encoding``)."""
