// Feeds a tick file to a Siddhi app and counts its outputs (benchmarks/peers/patterns.py compiles and runs it).
//
// java -cp <pysiddhi jars>:<dir> SiddhiDriver app.siddhi ticks.csv warmup matches.csv
// Ticks: id,ts,name,price,volume per line.  Prints one JSON line: build_s, events, seconds, outputs.
// Outputs of the Out stream (sid, a, b) are written to matches.csv, warm-up included.
import io.siddhi.core.SiddhiAppRuntime;
import io.siddhi.core.SiddhiManager;
import io.siddhi.core.event.Event;
import io.siddhi.core.stream.input.InputHandler;
import io.siddhi.core.stream.output.StreamCallback;

import java.io.PrintWriter;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.List;

public class SiddhiDriver {
    public static void main(String[] args) throws Exception {
        String app = new String(Files.readAllBytes(Paths.get(args[0])));
        List<String> lines = Files.readAllLines(Paths.get(args[1]));
        int warmup = Integer.parseInt(args[2]);
        int n = lines.size();
        Object[][] rows = new Object[n][];
        long[] ts = new long[n];
        for (int i = 0; i < n; i++) {
            String[] f = lines.get(i).split(",");
            ts[i] = Long.parseLong(f[1]);
            rows[i] = new Object[]{Long.parseLong(f[0]), f[2], Double.parseDouble(f[3]), Double.parseDouble(f[4])};
        }
        long t0 = System.nanoTime();
        SiddhiManager manager = new SiddhiManager();
        SiddhiAppRuntime runtime = manager.createSiddhiAppRuntime(app);
        final StringBuilder out = new StringBuilder();
        final long[] count = new long[1];
        runtime.addCallback("Out", new StreamCallback() {
            @Override
            public void receive(Event[] events) {
                for (Event e : events) {
                    Object[] d = e.getData();
                    out.append(d[0]).append(',').append(d[1]).append(',').append(d[2]).append('\n');
                    count[0]++;
                }
            }
        });
        runtime.start();
        double build = (System.nanoTime() - t0) / 1e9;
        InputHandler input = runtime.getInputHandler("Ticks");
        for (int i = 0; i < Math.min(warmup, n); i++) {
            input.send(ts[i], rows[i]);
        }
        long before = count[0];
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        long c1 = threads.getCurrentThreadCpuTime();  // Siddhi processes a sent event on the sending thread
        long t1 = System.nanoTime();
        for (int i = warmup; i < n; i++) {
            input.send(ts[i], rows[i]);
        }
        double seconds = (System.nanoTime() - t1) / 1e9;
        double cpu = (threads.getCurrentThreadCpuTime() - c1) / 1e9;
        runtime.shutdown();
        manager.shutdown();
        try (PrintWriter w = new PrintWriter(args[3])) {
            w.print(out);
        }
        System.out.println(String.format(
                "{\"build_s\": %.3f, \"events\": %d, \"seconds\": %.3f, \"cpu_s\": %.3f, \"outputs\": %d}",
                build, n - warmup, seconds, cpu, count[0] - before));
    }
}
