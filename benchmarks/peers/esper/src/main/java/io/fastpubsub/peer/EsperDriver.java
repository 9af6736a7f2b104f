package io.fastpubsub.peer;

import com.espertech.esper.common.client.EPCompiled;
import com.espertech.esper.common.client.EventBean;
import com.espertech.esper.common.client.configuration.Configuration;
import com.espertech.esper.compiler.client.CompilerArguments;
import com.espertech.esper.compiler.client.EPCompiler;
import com.espertech.esper.compiler.client.EPCompilerProvider;
import com.espertech.esper.runtime.client.DeploymentOptions;
import com.espertech.esper.runtime.client.EPEventService;
import com.espertech.esper.runtime.client.EPRuntime;
import com.espertech.esper.runtime.client.EPRuntimeProvider;
import com.espertech.esper.runtime.client.EPStatement;
import com.espertech.esper.runtime.client.UpdateListener;

import java.io.PrintWriter;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Feeds a tick file to the subscriptions' EPL statements and writes their matches (benchmarks/peers/patterns.py
 * runs it; the same protocol as benchmarks/peers/siddhi/SiddhiDriver.java).
 *
 * <pre>java -jar fastpubsub-esper-peer.jar statements.tsv ticks.csv warmup matches.csv [contexts|statements]</pre>
 *
 * Ticks: {@code id,ts,name,price,volume} per line, in timestamp order. Statements: one subscription per line,
 * {@code sid TAB epl TAB param...}: the EPL selects {@code a} and {@code b} (the bound events' ids, -1 for none)
 * and holds its constants as named substitution parameters {@code ?:p0:double}, {@code ?:p1:string}, ..., given
 * in that order as {@code d:<double>}, {@code l:<long>} or {@code s:<string>} (backslash escapes for tab,
 * newline and backslash). Subscriptions of one template share a compilation: "contexts" (the default) deploys
 * one statement per template whose context has a partition per subscription; "statements" deploys the compiled
 * text once per subscription with its parameters (a statement each, as if compiled from its own text).
 * Event time is the ticks' {@code ts}: the internal timer is off and the clock is advanced to each tick's
 * timestamp before the tick is sent, so {@code timer:within} counts event time. Prints one JSON line: build_s,
 * events, seconds, cpu_s, outputs (after the warm-up), statements, compiled, compile_s; the matches
 * ({@code sid,a,b}) go to matches.csv, warm-up included.
 */
public final class EsperDriver {
    private EsperDriver() {
    }

    public static void main(String[] args) throws Exception {
        List<String> statements = Files.readAllLines(Paths.get(args[0]), StandardCharsets.UTF_8);
        List<String> lines = Files.readAllLines(Paths.get(args[1]), StandardCharsets.UTF_8);
        int warmup = Integer.parseInt(args[2]);
        String mode = args.length > 4 ? args[4] : "contexts";
        if (!mode.equals("statements") && !mode.equals("contexts")) {
            throw new IllegalArgumentException("mode: statements or contexts, not " + mode);
        }
        int n = lines.size();
        Object[][] rows = new Object[n][];
        long[] ts = new long[n];
        for (int i = 0; i < n; i++) {
            String[] f = lines.get(i).split(",");
            ts[i] = Long.parseLong(f[1]);
            rows[i] = new Object[]{Long.parseLong(f[0]), ts[i], f[2], Double.parseDouble(f[3]), Double.parseDouble(f[4])};
        }

        long t0 = System.nanoTime();
        Configuration config = new Configuration();
        config.getCommon().addEventType("Tick", new String[]{"id", "ts", "name", "price", "volume"},
                new Object[]{Long.class, Long.class, String.class, Double.class, Double.class});
        config.getRuntime().getThreading().setInternalTimerEnabled(false);
        config.getRuntime().getExecution().setDisableLocking(true);  // one thread sends every event
        EPRuntime runtime = EPRuntimeProvider.getRuntime("patterns", config);
        EPEventService events = runtime.getEventService();
        events.advanceTime(n > 0 ? ts[0] : 0);  // a statement's timers start from the clock at deployment
        List<String[]> subscriptions = new ArrayList<>();
        for (String line : statements) {
            if (!line.isEmpty()) {
                subscriptions.add(line.split("\t", -1));
            }
        }
        StringBuilder out = new StringBuilder();
        long[] count = new long[1];
        Loaded loaded = mode.equals("contexts") ? deployContexts(runtime, config, subscriptions, out, count)
                : deployStatements(runtime, config, subscriptions, out, count);
        double build = (System.nanoTime() - t0) / 1e9;

        for (int i = 0; i < Math.min(warmup, n); i++) {
            events.advanceTime(ts[i]);
            events.sendEventObjectArray(rows[i], "Tick");
        }
        long before = count[0];
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        long c1 = threads.getCurrentThreadCpuTime();  // with the internal timer off Esper works on the sending thread
        long t1 = System.nanoTime();
        for (int i = warmup; i < n; i++) {
            events.advanceTime(ts[i]);
            events.sendEventObjectArray(rows[i], "Tick");
        }
        double seconds = (System.nanoTime() - t1) / 1e9;
        double cpu = (threads.getCurrentThreadCpuTime() - c1) / 1e9;
        runtime.destroy();
        try (PrintWriter w = new PrintWriter(args[3], StandardCharsets.UTF_8)) {
            w.print(out);
        }
        System.out.println(String.format(
                "{\"build_s\": %.3f, \"events\": %d, \"seconds\": %.3f, \"cpu_s\": %.3f, \"outputs\": %d, "
                        + "\"statements\": %d, \"compiled\": %d, \"compile_s\": %.3f}",
                build, Math.max(0, n - warmup), seconds, cpu, count[0] - before, subscriptions.size(), loaded.templates(),
                loaded.compileSeconds()));
    }

    /** How the subscriptions were loaded: templates compiled and the seconds that took. */
    record Loaded(int templates, double compileSeconds) {
    }

    /** Each distinct EPL text compiled once and deployed once per subscription with its parameters. */
    static Loaded deployStatements(EPRuntime runtime, Configuration config, List<String[]> subscriptions,
                                   StringBuilder out, long[] count) throws Exception {
        EPCompiler compiler = EPCompilerProvider.getCompiler();
        CompilerArguments compilerArgs = new CompilerArguments(config);
        Map<String, EPCompiled> compiled = new HashMap<>();
        long compileNanos = 0;
        for (String[] f : subscriptions) {
            long sid = Long.parseLong(f[0]);
            EPCompiled module = compiled.get(f[1]);
            if (module == null) {
                long c = System.nanoTime();
                module = compiler.compile(f[1], compilerArgs);
                compileNanos += System.nanoTime() - c;
                compiled.put(f[1], module);
            }
            Object[] params = parameters(f);
            DeploymentOptions options = new DeploymentOptions().setStatementSubstitutionParameter(ctx -> {
                for (int k = 0; k < params.length; k++) {
                    ctx.setObject("p" + k, params[k]);
                }
            });
            for (EPStatement statement : runtime.getDeploymentService().deploy(module, options).getStatements()) {
                statement.addListener(writer(out, count, sid));
            }
        }
        return new Loaded(compiled.size(), compileNanos / 1e9);
    }

    private static final Pattern PARAMETER = Pattern.compile("\\?:p(\\d+):(\\w+)");
    private static final Pattern PERIOD = Pattern.compile("\\?:p(\\d+):long msec");

    /**
     * One statement per template, run in a context partition per subscription: an overlapping context initiated by
     * one event per subscription that carries its sid and parameters, read by the statement as {@code context.s.pK}.
     * Each partition has its own pattern instances and filters, as a statement of its own would; starting a
     * partition costs no deployment. A time period takes no property, so a template is an EPL text with its
     * {@code timer:within} interval written in (one template per distinct interval).
     */
    static Loaded deployContexts(EPRuntime runtime, Configuration config, List<String[]> subscriptions,
                                 StringBuilder out, long[] count) throws Exception {
        EPCompiler compiler = EPCompilerProvider.getCompiler();
        CompilerArguments compilerArgs = new CompilerArguments(config);
        Map<String, String> types = new LinkedHashMap<>();  // template -> its event type
        List<Object[]> initiating = new ArrayList<>();
        List<String> initiatingTypes = new ArrayList<>();
        long compileNanos = 0;
        for (String[] f : subscriptions) {
            Object[] params = parameters(f);
            Matcher period = PERIOD.matcher(f[1]);
            String template = period.replaceAll(r -> params[Integer.parseInt(r.group(1))] + " msec");
            String type = types.get(template);
            if (type == null) {
                type = "Sub" + types.size();
                types.put(template, type);
                StringBuilder fields = new StringBuilder("sid long");
                Matcher m = PARAMETER.matcher(template);
                while (m.find()) {
                    fields.append(", p").append(m.group(1)).append(' ').append(m.group(2));
                }
                String context = "Ctx" + type;
                String epl = "@public @buseventtype create objectarray schema " + type + "(" + fields + ");\n"
                        + "create context " + context + " initiated by " + type + " as s;\n"
                        + "@name('q') context " + context + " "
                        + PARAMETER.matcher(template.replaceFirst("^select ", "select context.s.sid as sid, "))
                        .replaceAll("context.s.p$1") + ";";
                long c = System.nanoTime();
                EPCompiled module = compiler.compile(epl, compilerArgs);
                compileNanos += System.nanoTime() - c;
                for (EPStatement statement : runtime.getDeploymentService().deploy(module).getStatements()) {
                    if (statement.getName().equals("q")) {
                        statement.addListener(writer(out, count, null));
                    }
                }
            }
            List<Object> row = new ArrayList<>();
            row.add(Long.parseLong(f[0]));
            Matcher m = PARAMETER.matcher(template);
            while (m.find()) {
                row.add(params[Integer.parseInt(m.group(1))]);
            }
            initiating.add(row.toArray());
            initiatingTypes.add(type);
        }
        for (int i = 0; i < initiating.size(); i++) {
            runtime.getEventService().sendEventObjectArray(initiating.get(i), initiatingTypes.get(i));
        }
        return new Loaded(types.size(), compileNanos / 1e9);
    }

    /** Appends each match as {@code sid,a,b}: the subscription's {@code sid}, or the event's when null. */
    static UpdateListener writer(StringBuilder out, long[] count, Long sid) {
        return (newEvents, oldEvents, stmt, rt) -> {
            for (EventBean e : newEvents) {
                out.append(sid != null ? sid : e.get("sid")).append(',').append(e.get("a")).append(',')
                        .append(e.get("b")).append('\n');
                count[0]++;
            }
        };
    }

    static Object[] parameters(String[] fields) {
        Object[] params = new Object[fields.length - 2];
        for (int k = 0; k < params.length; k++) {
            params[k] = parameter(fields[k + 2]);
        }
        return params;
    }

    /** A typed parameter: {@code d:1.5}, {@code l:7}, {@code s:text} (escaped). */
    static Object parameter(String field) {
        String value = field.substring(2);
        switch (field.charAt(0)) {
            case 'd':
                return Double.parseDouble(value);
            case 'l':
                return Long.parseLong(value);
            case 's':
                return unescape(value);
            default:
                throw new IllegalArgumentException("unknown parameter type: " + field);
        }
    }

    static String unescape(String s) {
        StringBuilder b = new StringBuilder(s.length());
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '\\' && i + 1 < s.length()) {
                char d = s.charAt(++i);
                b.append(d == 't' ? '\t' : d == 'n' ? '\n' : d);
            } else {
                b.append(c);
            }
        }
        return b.toString();
    }
}
