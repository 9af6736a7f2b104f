"""What travels on the topics: the Avro schemas (package data), their codecs, the batch event decoder, topic names.

No Kafka client here: the processor, the statistics job and the CLI encode and
decode through this package and move the bytes with ``fastpubsub.kafka``.
"""
