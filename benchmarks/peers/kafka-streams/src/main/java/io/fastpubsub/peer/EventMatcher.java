package io.fastpubsub.peer;

import java.util.Map;

import org.apache.kafka.streams.processor.api.ContextualProcessor;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.processor.api.RecordMetadata;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One notification per subscription that an event matches, keyed by the subscriber. The event id is the record
 * key, or topic:partition:offset for a record without one, as the processor names them (processor/inputs.py);
 * the event time is the record's timestamp.
 */
final class EventMatcher extends ContextualProcessor<String, byte[], String, byte[]> {
    private static final Logger log = LoggerFactory.getLogger(EventMatcher.class);
    private final Matcher matcher;
    private final Counters counters;
    private final Wire wire = new Wire();

    EventMatcher(Matcher matcher, Counters counters) {
        this.matcher = matcher;
        this.counters = counters;
    }

    @Override
    public void process(Record<String, byte[]> record) {
        counters.events.incrementAndGet();
        Map<String, Object> event;
        try {
            event = wire.event(record.value());
        } catch (Wire.BadRecord e) {
            counters.badEvents.incrementAndGet();
            log.warn("event {} skipped: {}", eventId(record), e.getMessage());
            return;
        }
        String eventId = eventId(record);
        byte[] value = record.value();
        matcher.match(event, record.timestamp(), s -> {
            counters.notifications.incrementAndGet();
            context().forward(new Record<>(s.subscriber(), wire.notification(s, eventId, value), record.timestamp()));
        });
    }

    private String eventId(Record<String, byte[]> record) {
        if (record.key() != null) {
            return record.key();
        }
        RecordMetadata m = context().recordMetadata().orElseThrow();
        return m.topic() + ":" + m.partition() + ":" + m.offset();
    }
}
