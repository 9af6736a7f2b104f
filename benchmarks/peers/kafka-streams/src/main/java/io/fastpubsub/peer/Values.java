package io.fastpubsub.peer;

import org.apache.avro.util.Utf8;

/**
 * What a predicate means, as the processor defines it (src/fastpubsub/engine/semantics.py): a number, a string
 * and a boolean are comparable only with their own kind; numbers compare as doubles (an event value that is NaN
 * compares with nothing), strings by code point, booleans false &lt; true.
 */
final class Values {
    private Values() {
    }

    /** An Avro value (long, double, string, boolean) as the matcher holds it: Double, String or Boolean. */
    static Object of(Object avro) {
        if (avro instanceof Long l) {
            return number(l.doubleValue());
        }
        if (avro instanceof Double d) {
            return number(d);
        }
        if (avro instanceof Utf8 || avro instanceof String) {
            return avro.toString();
        }
        if (avro instanceof Boolean) {
            return avro;
        }
        throw new IllegalArgumentException("unsupported value " + avro);
    }

    /** -0.0 as 0.0, so that equal numbers are equal keys of the equality index (Double.equals tells them apart). */
    static Double number(double x) {
        return x == 0.0 ? 0.0 : x;
    }

    /** {@code eventValue op constant}; false when the two are not comparable. */
    static boolean compare(Op op, Object eventValue, Object constant) {
        int c;
        if (eventValue instanceof Double x && constant instanceof Double k) {
            double a = x, b = k;
            if (Double.isNaN(a)) {
                return false;
            }
            switch (op) {
                case EQ: return a == b;
                case NE: return a != b;
                case LT: return a < b;
                case LE: return a <= b;
                case GT: return a > b;
                default: return a >= b;
            }
        } else if (eventValue instanceof String x && constant instanceof String k) {
            if (op == Op.EQ) {
                return x.equals(k);
            }
            if (op == Op.NE) {
                return !x.equals(k);
            }
            c = compareCodePoints(x, k);
        } else if (eventValue instanceof Boolean x && constant instanceof Boolean k) {
            c = Boolean.compare(x, k);
        } else {
            return false;
        }
        switch (op) {
            case EQ: return c == 0;
            case NE: return c != 0;
            case LT: return c < 0;
            case LE: return c <= 0;
            case GT: return c > 0;
            default: return c >= 0;
        }
    }

    /** Python's str order (by code point): String.compareTo orders UTF-16 units, which puts a character above
     * U+FFFF (a surrogate pair) before U+E000..U+FFFF. */
    static int compareCodePoints(String a, String b) {
        int n = Math.min(a.length(), b.length());
        for (int i = 0; i < n; i++) {
            char x = a.charAt(i), y = b.charAt(i);
            if (x != y) {
                boolean sx = Character.isSurrogate(x), sy = Character.isSurrogate(y);
                if (sx != sy) {
                    return sx ? 1 : -1;
                }
                return x - y;
            }
        }
        return a.length() - b.length();
    }
}
