package io.fastpubsub.peer;

/** The six comparisons of a subscription record (schema id 1). */
enum Op {
    EQ("="), NE("!="), LT("<"), LE("<="), GT(">"), GE(">=");

    final String symbol;

    Op(String symbol) {
        this.symbol = symbol;
    }

    static Op of(String symbol) {
        for (Op op : values()) {
            if (op.symbol.equals(symbol)) {
                return op;
            }
        }
        throw new IllegalArgumentException("unknown operator " + symbol);
    }
}
