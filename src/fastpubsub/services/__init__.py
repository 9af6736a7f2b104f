"""The services: each a task of the one runtime (``fastpubsub.runtime``).

* ``services.events``: the event processor (``pubsub run``), subscriptions x events -> notifications;
* ``services.patterns``: pattern subscriptions over event sequences (``pubsub patterns``, Cayuga);
* ``services.tables``: aggregate subscriptions over tables (``pubsub tables``, Chandramouli et al.).
"""
