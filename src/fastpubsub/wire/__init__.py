"""What travels on the topics: the Avro schemas (package data) and their codecs."""
