package io.fastpubsub.peer;

import java.util.Map;

/** A conjunction of predicates, valid in event time from validFrom (inclusive) to validUntil (exclusive). */
record Subscription(long id, String subscriber, Predicate[] predicates, long validFrom, long validUntil) {
    boolean matches(Map<String, Object> event, long time) {
        if (time < validFrom || time >= validUntil) {
            return false;
        }
        for (Predicate p : predicates) {
            if (!p.holds(event)) {
                return false;
            }
        }
        return true;
    }

    /** The value of the first equality predicate on {@code attribute}, or null. */
    Object equalityOn(String attribute) {
        for (Predicate p : predicates) {
            if (p.op() == Op.EQ && p.attribute().equals(attribute)) {
                return p.value();
            }
        }
        return null;
    }
}
