"""Avro's binary encoding written by hand, from the specification: for tests that build values the product's
encoders never write (truncated, over-long, out of range, blocks with their byte size) to check the decoders."""

from __future__ import annotations


def zigzag(n: int) -> bytes:
    """An Avro int or long: zig-zag mapped, then seven bits a byte, lowest first, the high bit set on all but the
    last byte."""
    u = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = u & 0x7F
        u >>= 7
        if u:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def avro_string(b: bytes) -> bytes:
    """An Avro string or bytes: its length as a long, then the bytes as given (valid UTF-8 or not)."""
    return zigzag(len(b)) + b
