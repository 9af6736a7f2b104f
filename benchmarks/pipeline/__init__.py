"""The processor through Apache Kafka (the embedded broker): end to end, commits, restarts, topic reads, soaks, Spark."""
