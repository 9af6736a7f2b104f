package io.fastpubsub.peer;

import java.util.Map;
import java.util.function.Consumer;

/**
 * The subscriptions an event is tested against. One writer (the global store's thread, in subscription-topic
 * order) and any number of readers (the stream threads), so implementations use concurrent maps.
 */
interface Matcher {
    /** Adds the subscription, or replaces the one with its id. */
    void put(Subscription s);

    void remove(long id);

    int size();

    /** Every subscription that matches the event at event time {@code time}, once each. */
    void match(Map<String, Object> event, long time, Consumer<Subscription> out);

    static Matcher named(String name, String indexAttribute) {
        switch (name) {
            case "scan": return new ScanMatcher();
            case "indexed": return new IndexedMatcher(indexAttribute);
            default: throw new IllegalArgumentException("--matcher is scan or indexed, not " + name);
        }
    }
}
