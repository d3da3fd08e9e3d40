#!/usr/bin/env python3
"""Reads and crafts $PGDATA/ratelimit_memory.state (format 4, and the
format 3 that 0.8.0 and 0.9.0 wrote) for scripts/memory-restart-test.sh.

The format (native little-endian, x86-64):
  header, 64 bytes (format 3: the first 48): uint32 magic 0x524C4D53,
  uint32 format (4), uint32 pg_major, uint32 crc, uint64 records, uint64
  body_bytes, uint64 system_identifier, uint64 checkpoint (pg_control's, at
  the shutdown that wrote it: a file is loaded only when both still match),
  uint64 compact_seed, uint64 long_seed (the hash seeds of the tables the
  records came from, in whose order they are: any value is valid); crc is
  CRC-32C over the header from byte 16 on and then the whole body.
  body: `records` records, each a 56-byte fixed part
  '<IiiBBBBdqdqq' = (database, name_len, key_len (-1: the NULL key),
  exists, keep_prev, inline_share, reserved, value, ts, prev, idle_at,
  period) followed by the name's and the key's bytes.

Usage:
  memory_state_file.py dump FILE MAJOR
      validates FILE as a format-4 file of PostgreSQL MAJOR; prints one line
      per record (database name key value, the value to 2 decimals) or, on the first fault, one
      "invalid: ..." line and exits 1.
  memory_state_file.py seeds FILE
      prints the two hash seeds of FILE's format-4 header (hex), or one
      "invalid: ..." line and exits 1.
  memory_state_file.py craft CASE OUT MAJOR DATABASE NOW_US PG_CONTROL
      writes a file of CASE (below) to OUT for the cluster whose
      global/pg_control is PG_CONTROL (its system identifier and last
      checkpoint); the records are token-bucket entries of the limit named
      "damage" in DATABASE, taken at NOW_US (Unix microseconds): key 'k' at 6
      and the NULL key at 3. CASE good3 is a good file of format 3.
"""
import math
import os
import struct
import sys

MAGIC = 0x524C4D53
FORMAT = 4
HEADER = struct.Struct("<IIIIQQQQQQ")
HEADER3 = struct.Struct("<IIIIQQQQ")
FIXED = struct.Struct("<IiiBBBBdqdqq")
IDENTITY_BYTES = 236
# Unix microseconds of 0001-01-01 and of 100000-01-01.
MIN_US = -62135596800 * 1000000
MAX_US = 3093527980800 * 1000000
DAY_US = 86400 * 1000000


def crc32c_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


CRC_TABLE = crc32c_table()


def crc32c(data):
    """CRC-32C (Castagnoli): init 0xFFFFFFFF, reflected, final xor 0xFFFFFFFF."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def record(database, name, key, value, ts, idle_at, prev=0.0, keep_prev=0, period=0,
           inline_share=0, name_len=None, key_len=None):
    """One record: the fixed part, then the name's and the key's bytes."""
    name_bytes = name.encode()
    key_bytes = b"" if key is None else key.encode()
    if name_len is None:
        name_len = len(name_bytes)
    if key_len is None:
        key_len = -1 if key is None else len(key_bytes)
    fixed = FIXED.pack(database, name_len, key_len, 1, keep_prev, inline_share, 0,
                       value, ts, prev, idle_at, period)
    return fixed + name_bytes + key_bytes


def control_identity(path):
    """pg_control's system identifier (offset 0) and checkPoint (offset 32)."""
    data = open(path, "rb").read(40)
    return struct.unpack_from("<Q", data, 0)[0], struct.unpack_from("<Q", data, 32)[0]


def file_of(body, records, major, identity, fmt=FORMAT, magic=MAGIC):
    """The header (with its CRC) and the body; format 3's header has no seeds."""
    counts = struct.pack("<QQQQ", records, len(body), identity[0], identity[1])
    if fmt != 3:
        counts += os.urandom(16)
    crc = crc32c(counts + body)
    return struct.pack("<IIII", magic, fmt, major, crc) + counts + body


def damage_records(database, now_us):
    """The two valid records of every crafted file: 'damage'/'k' at 6, the NULL key at 3."""
    idle_at = now_us + 200 * DAY_US
    return [record(database, "damage", "k", 6.0, now_us, idle_at),
            record(database, "damage", None, 3.0, now_us, idle_at)]


def craft(case, major, database, now_us, identity):
    good = damage_records(database, now_us)
    body, n = b"".join(good), len(good)
    if case == "good":
        return file_of(body, n, major, identity)
    if case == "good3":
        return file_of(body, n, major, identity, fmt=3)
    if case == "format":
        return file_of(body, n, major, identity, fmt=FORMAT + 1)
    if case == "major":
        return file_of(body, n, major + 1, identity)
    if case == "stale":
        # Written before another checkpoint: the server ran since without the preload.
        return file_of(body, n, major, (identity[0], identity[1] - 1))
    if case == "foreign":
        return file_of(body, n, major, (identity[0] + 1, identity[1]))
    if case == "huge-lengths":
        # 0x7fffffff + 2 wraps to a negative int32: a check of the sum alone passes.
        bad = record(database, "damage", "xy", 1.0, now_us, now_us + DAY_US, name_len=0x7FFFFFFF, key_len=2)
        return file_of(body + bad + b"x" * 16, n + 1, major, identity)
    if case == "nan":
        bad = record(database, "damage", "nan", float("nan"), now_us, now_us + DAY_US)
        return file_of(body + bad, n + 1, major, identity)
    if case == "empty":
        return b""
    if case == "random":
        return os.urandom(4096)
    data = file_of(body, n, major, identity)
    if case == "truncated":
        # Cut inside a record (not at a record's end).
        return data[: HEADER.size + FIXED.size + 7]
    if case == "bad-crc":
        # Every record valid, only the checksum wrong: found after the last
        # record made its entry.
        return data[:12] + bytes([data[12] ^ 0x01]) + data[13:]
    if case == "flipped":
        # One bit of the body's middle: only the CRC can tell.
        at = HEADER.size + (len(data) - HEADER.size) // 2
        return data[:at] + bytes([data[at] ^ 0x10]) + data[at + 1:]
    raise SystemExit(f"unknown case {case}")


def parse(data, major):
    """The records of a valid file, or raises ValueError naming the fault."""
    if len(data) < HEADER.size:
        raise ValueError(f"{len(data)} bytes, shorter than the header")
    magic, fmt, file_major, crc, records, body_bytes = HEADER.unpack_from(data)[:6]
    if magic != MAGIC:
        raise ValueError(f"magic {magic:#x}, not {MAGIC:#x}")
    if fmt != FORMAT:
        raise ValueError(f"format {fmt}, not {FORMAT}")
    if file_major != major:
        raise ValueError(f"pg_major {file_major}, not {major}")
    if len(data) != HEADER.size + body_bytes:
        raise ValueError(f"{len(data)} bytes, not {HEADER.size} + body_bytes {body_bytes}")
    if crc32c(data[16:]) != crc:
        raise ValueError(f"crc {crc:#x}, not {crc32c(data[16:]):#x}")
    out, at = [], HEADER.size
    for i in range(records):
        if at + FIXED.size > len(data):
            raise ValueError(f"record {i} runs past the body")
        (database, name_len, key_len, exists, keep_prev, inline_share, reserved,
         value, ts, prev, idle_at, period) = FIXED.unpack_from(data, at)
        used = name_len + max(0, key_len)
        faults = [database == 0 and "database 0", name_len < 1 and "name_len < 1",
                  key_len < -1 and "key_len < -1", used > IDENTITY_BYTES and "identity > 236 bytes",
                  exists != 1 and "exists not 1", keep_prev not in (0, 1) and "keep_prev",
                  inline_share not in (0, 1) and "inline_share", reserved != 0 and "reserved",
                  not (math.isfinite(value) and math.isfinite(prev)) and "value or prev not finite",
                  not (MIN_US <= ts <= MAX_US and MIN_US <= idle_at <= MAX_US) and "ts or idle_at",
                  period < 0 and "period < 0"]
        faults = [f for f in faults if f]
        if faults:
            raise ValueError(f"record {i}: {', '.join(faults)}")
        at += FIXED.size
        name = data[at:at + name_len].decode(errors="replace")
        key = None if key_len < 0 else data[at + name_len:at + used].decode(errors="replace")
        at += used
        out.append((database, name, key, value))
    if at != len(data):
        raise ValueError(f"{len(data) - at} bytes after the last record")
    return out


def main(argv):
    if len(argv) == 4 and argv[1] == "dump":
        try:
            records = parse(open(argv[2], "rb").read(), int(argv[3]))
        except (OSError, ValueError) as e:
            print(f"invalid: {e}")
            return 1
        for database, name, key, value in records:
            print(database, name, "<NULL>" if key is None else key, f"{value:.2f}")
        return 0
    if len(argv) == 3 and argv[1] == "seeds":
        data = open(argv[2], "rb").read(HEADER.size)
        if len(data) < HEADER.size or HEADER.unpack_from(data)[1] != FORMAT:
            print("invalid: not a format-4 header")
            return 1
        print("%016x %016x" % HEADER.unpack_from(data)[8:10])
        return 0
    if len(argv) == 8 and argv[1] == "craft":
        data = craft(argv[2], int(argv[4]), int(argv[5]), int(argv[6]), control_identity(argv[7]))
        with open(argv[3], "wb") as out:
            out.write(data)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
