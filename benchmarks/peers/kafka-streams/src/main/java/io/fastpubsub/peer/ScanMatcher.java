package io.fastpubsub.peer;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

/** Every subscription tested against every event. */
final class ScanMatcher implements Matcher {
    private final ConcurrentHashMap<Long, Subscription> all = new ConcurrentHashMap<>();

    @Override
    public void put(Subscription s) {
        all.put(s.id(), s);
    }

    @Override
    public void remove(long id) {
        all.remove(id);
    }

    @Override
    public int size() {
        return all.size();
    }

    @Override
    public void match(Map<String, Object> event, long time, Consumer<Subscription> out) {
        for (Subscription s : all.values()) {
            if (s.matches(event, time)) {
                out.accept(s);
            }
        }
    }
}
