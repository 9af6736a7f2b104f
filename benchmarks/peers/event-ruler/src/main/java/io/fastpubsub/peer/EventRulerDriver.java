package io.fastpubsub.peer;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import software.amazon.event.ruler.GenericMachine;

/**
 * Event Ruler on one thread, as its own CL2Benchmark runs it: every event's JSON text given to
 * {@code rulesForJSONEvent(String)}, the matches counted per rule.
 *
 * <p>Usage: {@code EVENTS.jsonl WARMUP_PASSES RULES.jsonl [RULES.jsonl ...]}: the events one JSON object a line,
 * each rule file one Event Ruler pattern a line (rule i is its i-th line). Per rule file, a machine of its own:
 * the heap in use after a GC without it and with its rules loaded, then {@code WARMUP_PASSES} untimed passes over
 * the events (so the JIT has compiled the matching path), then one timed pass; before the first rule file, its
 * warm-up passes run once more on a machine of their own (the JVM's warm-up). One JSON line per rule file on
 * standard output: {@code rules, events, build_s, seconds, events_per_s, memory_bytes_per_rule, counts}.
 */
public final class EventRulerDriver {

    private EventRulerDriver() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: EVENTS.jsonl WARMUP_PASSES RULES.jsonl [RULES.jsonl ...]");
            System.exit(2);
        }
        List<String> events = lines(Path.of(args[0]));
        int warmup = Integer.parseInt(args[1]);
        // the JVM warmed once on the first rule set, as CL2Benchmark runs its first rules twice: the JSON parser
        // and the matching path are then compiled before any timed pass, whichever rule set comes first
        GenericMachine<Integer> first = new GenericMachine<>();
        List<String> firstRules = lines(Path.of(args[2]));
        for (int i = 0; i < firstRules.size(); i++) {
            first.addRule(i, firstRules.get(i));
        }
        for (int pass = 0; pass < warmup; pass++) {
            for (String event : events) {
                first.rulesForJSONEvent(event);
            }
        }
        first = null;
        for (int f = 2; f < args.length; f++) {
            run(events, warmup, Path.of(args[f]));
        }
    }

    private static List<String> lines(Path path) throws IOException {
        List<String> out = new ArrayList<>();
        for (String line : Files.readAllLines(path, StandardCharsets.UTF_8)) {
            if (!line.isBlank()) {
                out.add(line);
            }
        }
        return out;
    }

    /** Heap in use after the collector has had its chance (a few full GCs: one may leave garbage behind). */
    private static long usedHeap() throws InterruptedException {
        MemoryMXBean memory = ManagementFactory.getMemoryMXBean();
        long used = Long.MAX_VALUE;
        for (int i = 0; i < 4; i++) {
            System.gc();
            Thread.sleep(50);
            used = Math.min(used, memory.getHeapMemoryUsage().getUsed());
        }
        return used;
    }

    private static void run(List<String> events, int warmup, Path rulesFile) throws Exception {
        List<String> rules = lines(rulesFile);
        int n = rules.size();
        long before = usedHeap();
        long t0 = System.nanoTime();
        GenericMachine<Integer> machine = new GenericMachine<>();
        for (int i = 0; i < rules.size(); i++) {
            machine.addRule(i, rules.get(i));
        }
        double buildSeconds = (System.nanoTime() - t0) / 1e9;
        rules = null;  // the texts are not the machine's memory
        long after = usedHeap();
        long[] counts = new long[n];
        for (int pass = 0; pass < warmup; pass++) {
            for (String event : events) {
                machine.rulesForJSONEvent(event);
            }
        }
        long start = System.nanoTime();
        for (String event : events) {
            for (Integer rule : machine.rulesForJSONEvent(event)) {
                counts[rule]++;
            }
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        StringBuilder out = new StringBuilder(64 + 8 * counts.length);
        out.append("{\"rules\": \"").append(rulesFile.toString().replace("\\", "\\\\").replace("\"", "\\\""))
           .append("\", \"events\": ").append(events.size())
           .append(", \"build_s\": ").append(buildSeconds)
           .append(", \"seconds\": ").append(seconds)
           .append(", \"events_per_s\": ").append(events.size() / seconds)
           .append(", \"memory_bytes_per_rule\": ").append(counts.length == 0 ? 0 : (after - before) / (double) counts.length)
           .append(", \"counts\": [");
        for (int i = 0; i < counts.length; i++) {
            out.append(i == 0 ? "" : ", ").append(counts[i]);
        }
        out.append("]}");
        System.out.println(out);
        System.out.flush();
    }
}
