package io.fastpubsub.peer;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.Stores;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The event processor's job as a Kafka Streams application: subscriptions from pubsub.subscriptions in a global
 * store (every instance holds all of them), each event of pubsub.events tested against them, one notification per
 * match to pubsub.notifications, exactly once (exactly_once_v2).
 *
 * <pre>
 * java -jar fastpubsub-streams-peer.jar --bootstrap-servers HOST:PORT [--application-id ID] [--matcher scan|indexed]
 *      [--index-attribute a0] [--threads 1] [--state-dir DIR] [--config KEY=VALUE ...]
 * </pre>
 * On SIGTERM it closes the application and prints one JSON line of counts.
 */
public final class StreamsPeer {
    static final String SUBSCRIPTIONS = "pubsub.subscriptions";
    static final String EVENTS = "pubsub.events";
    static final String NOTIFICATIONS = "pubsub.notifications";
    static final String STORE = "subscriptions";
    private static final Logger log = LoggerFactory.getLogger(StreamsPeer.class);

    private StreamsPeer() {
    }

    public static void main(String[] args) throws InterruptedException {
        Map<String, String> options = new LinkedHashMap<>(Map.of(
                "application-id", "pubsub-streams-peer", "matcher", "indexed", "index-attribute", "a0",
                "threads", "1", "state-dir", System.getProperty("java.io.tmpdir") + "/pubsub-streams-peer"));
        Properties config = new Properties();
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                usage("expected --option VALUE pairs, got " + args[i]);
            }
            String name = args[i].substring(2), value = args[i + 1];
            if (name.equals("config")) {
                int eq = value.indexOf('=');
                if (eq < 1) {
                    usage("--config takes KEY=VALUE, got " + value);
                }
                config.put(value.substring(0, eq), value.substring(eq + 1));
            } else if (name.equals("bootstrap-servers") || options.containsKey(name)) {
                options.put(name, value);
            } else {
                usage("unknown option --" + name);
            }
        }
        if (!options.containsKey("bootstrap-servers")) {
            usage("--bootstrap-servers is required");
        }
        Matcher matcher = Matcher.named(options.get("matcher"), options.get("index-attribute"));
        Counters counters = new Counters();

        StreamsBuilder builder = new StreamsBuilder();
        builder.addGlobalStore(
                Stores.keyValueStoreBuilder(Stores.inMemoryKeyValueStore(STORE), Serdes.String(), Serdes.ByteArray())
                        .withLoggingDisabled(),
                SUBSCRIPTIONS, Consumed.with(Serdes.String(), Serdes.ByteArray()),
                () -> new SubscriptionUpdater(STORE, matcher, counters));
        builder.stream(EVENTS, Consumed.with(Serdes.String(), Serdes.ByteArray()))
                .process(() -> new EventMatcher(matcher, counters))
                .to(NOTIFICATIONS, Produced.with(Serdes.String(), Serdes.ByteArray()));

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, options.get("application-id"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, options.get("bootstrap-servers"));
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.parseInt(options.get("threads")));
        props.put(StreamsConfig.STATE_DIR_CONFIG, options.get("state-dir"));
        props.put("processing.exception.handler.global.enabled", "true");  // the default from Kafka 5.0 on
        props.putAll(config);

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch stopped = new CountDownLatch(1);
        AtomicBoolean failed = new AtomicBoolean();
        streams.setUncaughtExceptionHandler(e -> {
            log.error("stream thread failed", e);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING) {
                log.info("running: {} subscriptions, matcher {}", matcher.size(), options.get("matcher"));
            }
            if (now == KafkaStreams.State.ERROR) {
                failed.set(true);
            }
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                stopped.countDown();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(60));
            System.out.println(String.format(
                    "{\"system\": \"kafka-streams\", \"matcher\": \"%s\", \"threads\": %s, \"subscriptions\": %d, "
                            + "\"events\": %d, \"notifications\": %d, \"bad_events\": %d, \"bad_subscriptions\": %d}",
                    options.get("matcher"), options.get("threads"), matcher.size(), counters.events.get(),
                    counters.notifications.get(), counters.badEvents.get(), counters.badSubscriptions.get()));
            System.out.flush();
            Runtime.getRuntime().halt(failed.get() ? 1 : 0);  // a stop on SIGTERM is a clean exit, not 143
        }));
        streams.start();
        stopped.await();
        System.exit(failed.get() ? 1 : 0);
    }

    private static void usage(String why) {
        System.err.println(why);
        System.err.println("usage: java -jar fastpubsub-streams-peer.jar --bootstrap-servers HOST:PORT "
                + "[--application-id ID] [--matcher scan|indexed] [--index-attribute NAME] [--threads N] "
                + "[--state-dir DIR] [--config KEY=VALUE ...]");
        System.exit(2);
    }
}
