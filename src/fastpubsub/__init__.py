"""fastpubsub: a content-based publish/subscribe stream processor on Kafka.

``fastpubsub.engine`` is the matcher library (no Kafka, no Spark); the other
sub-packages carry it onto Kafka topics.
"""

__version__ = "0.1.0"
