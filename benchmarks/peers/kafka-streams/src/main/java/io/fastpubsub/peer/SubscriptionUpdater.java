package io.fastpubsub.peer;

import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps the global store of pubsub.subscriptions and the matcher in step, record by record: a tombstone removes
 * the subscription, a value replaces it, an invalid value removes it (as the processor does, which also
 * dead-letters it). Kafka Streams runs this on the global thread, also while it restores the store at start-up,
 * so the matcher is rebuilt from the topic before any event is processed.
 */
final class SubscriptionUpdater implements Processor<String, byte[], Void, Void> {
    private static final Logger log = LoggerFactory.getLogger(SubscriptionUpdater.class);
    private final String storeName;
    private final Matcher matcher;
    private final Counters counters;
    private final Wire wire = new Wire();
    private KeyValueStore<String, byte[]> store;

    SubscriptionUpdater(String storeName, Matcher matcher, Counters counters) {
        this.storeName = storeName;
        this.matcher = matcher;
        this.counters = counters;
    }

    @Override
    public void init(ProcessorContext<Void, Void> context) {
        store = context.getStateStore(storeName);
    }

    @Override
    public void process(Record<String, byte[]> record) {
        long id;
        try {
            id = subscriptionId(record.key());
        } catch (IllegalArgumentException e) {
            counters.badSubscriptions.incrementAndGet();
            log.warn("subscription record skipped: {}", e.getMessage());
            return;
        }
        if (record.value() == null) {
            store.delete(record.key());
            matcher.remove(id);
            return;
        }
        try {
            matcher.put(wire.subscription(id, record.value()));
            store.put(record.key(), record.value());
        } catch (Wire.BadRecord e) {
            counters.badSubscriptions.incrementAndGet();
            log.warn("subscription {} removed, its value is invalid: {}", id, e.getMessage());
            store.delete(record.key());
            matcher.remove(id);
        }
    }

    /** The record key: the subscription id as a decimal signed 64-bit integer. */
    static long subscriptionId(String key) {
        if (key == null || key.isEmpty() || key.charAt(0) == '+') {
            throw new IllegalArgumentException("the key must be the subscription id as a decimal string, got " + key);
        }
        try {
            return Long.parseLong(key);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("subscription key " + key + " is not a decimal signed 64-bit integer");
        }
    }
}
