"""The event processor's parts in one process, without a broker: decoding, rebuilding, snapshots, a shard's memory."""
