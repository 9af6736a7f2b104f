package io.fastpubsub.peer;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

/**
 * An equality index on one attribute: the subscriptions with an equality predicate on it, by its value, and a
 * list of the rest. An event is tested against the subscriptions under its own value of the attribute and the
 * rest: no others can match it.
 */
final class IndexedMatcher implements Matcher {
    private final String attribute;
    private final ConcurrentHashMap<Object, ConcurrentHashMap<Long, Subscription>> byValue = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<Long, Subscription> rest = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<Long, Subscription> all = new ConcurrentHashMap<>();

    IndexedMatcher(String attribute) {
        this.attribute = attribute;
    }

    @Override
    public void put(Subscription s) {
        remove(s.id());
        all.put(s.id(), s);
        Object key = s.equalityOn(attribute);
        if (key == null) {
            rest.put(s.id(), s);
        } else {
            byValue.computeIfAbsent(key, k -> new ConcurrentHashMap<>()).put(s.id(), s);
        }
    }

    @Override
    public void remove(long id) {
        Subscription old = all.remove(id);
        if (old == null) {
            return;
        }
        Object key = old.equalityOn(attribute);
        if (key == null) {
            rest.remove(id);
            return;
        }
        ConcurrentHashMap<Long, Subscription> bucket = byValue.get(key);
        bucket.remove(id);
        if (bucket.isEmpty()) {
            byValue.remove(key);
        }
    }

    @Override
    public int size() {
        return all.size();
    }

    @Override
    public void match(Map<String, Object> event, long time, Consumer<Subscription> out) {
        Object v = event.get(attribute);
        if (v != null) {
            ConcurrentHashMap<Long, Subscription> bucket = byValue.get(v);
            if (bucket != null) {
                scan(bucket, event, time, out);
            }
        }
        scan(rest, event, time, out);
    }

    private static void scan(ConcurrentHashMap<Long, Subscription> subs, Map<String, Object> event, long time,
                             Consumer<Subscription> out) {
        for (Subscription s : subs.values()) {
            if (s.matches(event, time)) {
                out.accept(s);
            }
        }
    }
}
