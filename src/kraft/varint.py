"""Kafka's unsigned varint, which its flexible versions write lengths, counts and tags in: one
primitive that the protocol's framing and the records' control values both write, and neither
layer may import from the other."""


def uvarint(n: int) -> bytes:
    """An unsigned varint: seven bits a byte, least significant first, the high bit set on all
    but the last."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
