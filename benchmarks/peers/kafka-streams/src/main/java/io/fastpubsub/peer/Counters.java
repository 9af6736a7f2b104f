package io.fastpubsub.peer;

import java.util.concurrent.atomic.AtomicLong;

/** What the application did, printed as its last line at exit (the driver reads it). */
final class Counters {
    final AtomicLong events = new AtomicLong();
    final AtomicLong notifications = new AtomicLong();
    final AtomicLong badEvents = new AtomicLong();
    final AtomicLong badSubscriptions = new AtomicLong();
}
