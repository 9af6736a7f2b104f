package io.fastpubsub.peer;

import java.util.Map;

/** {@code attribute op value}: fails when the event lacks the attribute (!= included). */
record Predicate(String attribute, Op op, Object value) {
    boolean holds(Map<String, Object> event) {
        Object v = event.get(attribute);
        return v != null && Values.compare(op, v, value);
    }
}
