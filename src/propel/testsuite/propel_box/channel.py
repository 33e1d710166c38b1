"""The result channel from a graded child to its runner: one line per record, authenticated with a key that only the
runner's own code holds.

The runner draws a fresh key per child, forks, and the child's guard code keeps the key in a closure and its
writer's functions as references taken before any model code runs (``os.write``, ``hashlib.sha256``,
``binascii.hexlify``: C functions, so rebinding a module attribute later changes nothing). A record is
``seq,kind,field..,mac`` with hex-encoded fields and an HMAC-SHA256 over the rest; the runner refuses lines whose MAC
or sequence number is wrong. Code in the child can close the channel's fd or write to it, but it cannot add a record
the runner accepts without the key, and reaching the key needs a frame or a heap walk (which the audit hook reports
through this same channel first).
"""

import binascii
import hashlib
import os

_IPAD, _OPAD = bytes(x ^ 0x36 for x in range(256)), bytes(x ^ 0x5C for x in range(256))


def _pads(key):
    key = key.ljust(64, b"\0")
    return key.translate(_IPAD), key.translate(_OPAD)


def writer(fd, key):
    """A ``send(kind, *fields)`` for the child: each field a str; writes one authenticated line immediately."""
    inner, outer = _pads(key)
    write, sha256, hexlify, encode = os.write, hashlib.sha256, binascii.hexlify, str.encode
    join, number, state = b",".join, int.__repr__, [0]

    def send(kind, *fields):
        body = join([encode(number(state[0])), encode(kind), *[hexlify(encode(f, "utf-8", "replace")) for f in fields]])
        mac = hexlify(sha256(outer + sha256(inner + body).digest()).digest())
        state[0] += 1
        try:  # noqa: SIM105 - no contextlib: its code is a module attribute graded code could rebind
            write(fd, body + b"," + mac + b"\n")
        except OSError:
            pass

    return send


def read_records(data, key):
    """``(records, forged)``: the authenticated records in order, each ``(kind, [fields])``, and how many lines
    were refused (wrong MAC, a sequence number out of order, or malformed)."""
    inner, outer = _pads(key)
    records, forged, expected = [], 0, 0
    for line in data.split(b"\n"):
        if not line:
            continue
        head, _, mac = line.rpartition(b",")
        want = binascii.hexlify(hashlib.sha256(outer + hashlib.sha256(inner + head).digest()).digest())
        parts = head.split(b",")
        if len(parts) < 2 or mac != want or parts[0] != str(expected).encode():
            forged += 1
            continue
        expected += 1
        try:
            fields = [binascii.unhexlify(p).decode("utf-8", "replace") for p in parts[2:]]
        except (ValueError, binascii.Error):
            forged += 1
            continue
        records.append((parts[1].decode("ascii", "replace"), fields))
    return records, forged
