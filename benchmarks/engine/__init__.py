"""The matching engine in one process: throughput, memory and load time of the algorithms on W0, and where the time per event goes."""
