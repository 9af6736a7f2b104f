package io.fastpubsub.peer;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.avro.Schema;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;

/**
 * The records of the processor's topics in Avro, Confluent wire format (src/fastpubsub/wire/codecs.py): a zero
 * byte, a 4-byte big-endian schema id (fixed per schema file, no registry), the Avro binary body. The schemas are
 * the processor's own files (copied into the jar by the build). One instance per thread: decoders are reused.
 */
final class Wire {
    static final int SUBSCRIPTION = 1, EVENT = 2, NOTIFICATION = 3;

    private final GenericDatumReader<GenericRecord> subscriptions = new GenericDatumReader<>(schema("subscription"));
    private final ByteArrayOutputStream buffer = new ByteArrayOutputStream(1024);
    private BinaryDecoder decoder;
    private BinaryEncoder encoder;

    /** Thrown for a value the processor would dead-letter; the message says why. */
    static final class BadRecord extends Exception {
        BadRecord(String why) {
            super(why);
        }
    }

    private static Schema schema(String name) {
        try (InputStream in = Wire.class.getResourceAsStream("/schemas/" + name + ".avsc")) {
            return new Schema.Parser().parse(in);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static void header(byte[] value, int schemaId, String what) throws BadRecord {
        if (value == null || value.length < 5 || value[0] != 0) {
            throw new BadRecord(what + " is not Avro in the Confluent wire format");
        }
        int id = ByteBuffer.wrap(value, 1, 4).getInt();
        if (id != schemaId) {
            throw new BadRecord(what + " has schema id " + id + ", this peer reads " + schemaId);
        }
    }

    /** A subscription value; its id is the record key (a decimal long). */
    Subscription subscription(long id, byte[] value) throws BadRecord {
        header(value, SUBSCRIPTION, "subscription");
        GenericRecord r;
        try {
            decoder = DecoderFactory.get().binaryDecoder(value, 5, value.length - 5, decoder);
            r = subscriptions.read(null, decoder);
        } catch (IOException | RuntimeException e) {
            throw new BadRecord("invalid Avro subscription: " + e);
        }
        List<Predicate> predicates = new ArrayList<>();
        for (Object o : (List<?>) r.get("predicates")) {
            GenericRecord p = (GenericRecord) o;
            Object v = Values.of(p.get("value"));
            if (v instanceof Double d && d.isNaN()) {
                throw new BadRecord("NaN is not a valid predicate value");
            }
            String attribute = p.get("attribute").toString();
            if (attribute.isEmpty()) {
                throw new BadRecord("empty attribute name");
            }
            try {
                predicates.add(new Predicate(attribute, Op.of(p.get("operator").toString()), v));
            } catch (IllegalArgumentException e) {
                throw new BadRecord(e.getMessage());
            }
        }
        if (predicates.isEmpty()) {
            throw new BadRecord("a subscription needs at least one predicate");
        }
        Object from = r.get("valid_from"), until = r.get("valid_until");
        return new Subscription(id, r.get("subscriber").toString(), predicates.toArray(new Predicate[0]),
                from == null ? Long.MIN_VALUE : (Long) from, until == null ? Long.MAX_VALUE : (Long) until);
    }

    /** An event value: its attribute map, read straight off the decoder (the hot path: no GenericRecord). */
    Map<String, Object> event(byte[] value) throws BadRecord {
        header(value, EVENT, "event");
        try {
            decoder = DecoderFactory.get().binaryDecoder(value, 5, value.length - 5, decoder);
            Map<String, Object> event = new HashMap<>(64);
            for (long n = decoder.readMapStart(); n != 0; n = decoder.mapNext()) {
                for (long i = 0; i < n; i++) {
                    String name = decoder.readString();
                    Object v;
                    switch (decoder.readIndex()) {  // ["long", "double", "string", "boolean"]
                        case 0: v = Values.number(decoder.readLong()); break;
                        case 1: v = Values.number(decoder.readDouble()); break;
                        case 2: v = decoder.readString(); break;
                        case 3: v = decoder.readBoolean(); break;
                        default: throw new BadRecord("invalid Avro event: bad union index");
                    }
                    if (event.put(name, v) != null) {
                        throw new BadRecord("attribute " + name + " twice");
                    }
                }
            }
            if (!decoder.isEnd()) {
                throw new BadRecord("trailing bytes after the event");
            }
            return event;
        } catch (IOException | RuntimeException e) {
            throw new BadRecord("invalid Avro event: " + e);
        }
    }

    /**
     * A notification (schema id 3): its head fields, then the event's attribute map as the event record carries
     * it (an event record's body is its one field, the map the notification ends with).
     */
    byte[] notification(Subscription s, String eventId, byte[] eventValue) {
        buffer.reset();
        buffer.write(0);
        buffer.write(0);
        buffer.write(0);
        buffer.write(0);
        buffer.write(NOTIFICATION);
        encoder = EncoderFactory.get().directBinaryEncoder(buffer, encoder);
        try {
            encoder.writeString(eventId + "/" + s.id());
            encoder.writeLong(s.id());
            encoder.writeString(s.subscriber());
            encoder.writeString(eventId);
            encoder.flush();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        buffer.write(eventValue, 5, eventValue.length - 5);
        return buffer.toByteArray();
    }
}
