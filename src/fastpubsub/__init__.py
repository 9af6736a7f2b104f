"""fastpubsub: a content-based publish/subscribe stream processor on Kafka.

The sub-packages are the architecture, and imports run one way, top to bottom
(checked by import-linter, contracts in pyproject.toml):

* ``cli``: the ``pubsub`` command (``python -m fastpubsub``);
* ``processor``: the service, a batch flowing inputs -> decode -> match -> encode -> deliver;
  ``stats_job``: the Spark statistics job (the two never import each other);
* ``kafka``: every Kafka client from one factory, delivery, dead letters, queue bounds, topics;
* ``wire``: what travels on the topics (Avro schemas as package data, codecs, topic names);
* ``language``: the subscription text language;
* ``engine``: the matcher library (no Kafka, no Spark); its ``__init__`` is its public API.
"""

__version__ = "0.1.0"
