#!/usr/bin/env python3
"""Compares a /metrics scrape of prometheus-postgres-exporter, run with
examples/prometheus/queries.yaml, with the rows of ratelimit_stats read by
the exporter's role (scripts/metrics-test.sh).

  prometheus_metrics_check.py METRICS COLUMNS SOURCE... [--require-nonzero]

METRICS: the scrape (Prometheus text format 0.0.4). COLUMNS: a JSON array of
the view's column names, from the catalog: every column but name and
stats_reset is exported, a counter as ratelimit_stats_<column>_total and the
gauge tokens_granted as ratelimit_stats_tokens_granted; stats_reset is
ratelimit_stats_reset_time_seconds. Each SOURCE is DATNAME=ROWS.json: the
view's rows (a JSON array of objects, with reset_epoch = extract(epoch FROM
stats_reset)) as one DSN of the exporter reads them, whose series must carry
datname = DATNAME (empty: no datname label, as for a pg_read_all_stats
role). Every series of every family must be a row's and every row must have
its series in every family, with the value equal (as float64) to the view's.
--require-nonzero: each counter must be non-zero in some row (the test's
traffic exercised it).

Exit status: 0 equal, 1 a difference (each printed), 2 bad input.
"""
import json
import sys

PREFIX = "ratelimit_stats_"
# Columns whose metric is a gauge (the rest are counters): tokens_granted is
# net of refunds, so it can go down.
GAUGES = {"tokens_granted"}


def parse_series(line):
    """name, labels (dict), value of one sample line."""
    i = 0
    n = len(line)
    while i < n and line[i] not in "{ ":
        i += 1
    name = line[:i]
    labels = {}
    if i < n and line[i] == "{":
        i += 1
        while True:
            if line[i] == "}":
                i += 1
                break
            eq = line.index("=", i)
            label = line[i:eq].strip()
            if line[eq + 1] != '"':
                raise ValueError("label value not quoted: " + line)
            i = eq + 2
            value = []
            while line[i] != '"':
                if line[i] == "\\":
                    nxt = line[i + 1]
                    value.append({"n": "\n", "\\": "\\", '"': '"'}.get(nxt, "\\" + nxt))
                    i += 2
                else:
                    value.append(line[i])
                    i += 1
            labels[label] = "".join(value)
            i += 1
            if line[i] == ",":
                i += 1
    fields = line[i:].split()
    if not fields:
        raise ValueError("no value: " + line)
    return name, labels, float(fields[0])


def main(argv):
    require_nonzero = "--require-nonzero" in argv
    args = [a for a in argv if a != "--require-nonzero"]
    if len(args) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    metrics_path, columns_path, sources = args[0], args[1], args[2:]
    with open(columns_path) as f:
        columns = json.load(f)
    if "name" not in columns or "stats_reset" not in columns:
        print("FAIL: the view has no name or stats_reset column: %s" % columns)
        return 2
    counters = [c for c in columns if c not in ("name", "stats_reset")]
    families = {PREFIX + c + ("" if c in GAUGES else "_total"): c for c in counters}
    families[PREFIX + "reset_time_seconds"] = "reset_epoch"

    # What the view says: (datname, name) -> row.
    expected = {}
    for source in sources:
        datname, path = source.split("=", 1)
        with open(path) as f:
            rows = json.load(f)
        for row in rows:
            name = row["name"] if row["name"] is not None else ""
            expected[(datname, name)] = row

    # What the exporter says.
    types = {}
    scraped = {family: {} for family in families}
    others = {}
    problems = []
    with open(metrics_path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# TYPE "):
                _, _, family, kind = line.split(" ", 3)
                types[family] = kind
                continue
            if not line or line.startswith("#"):
                continue
            name, labels, value = parse_series(line)
            if name.startswith(PREFIX) and name not in families:
                problems.append("a metric the view has no column for: %s" % line)
                continue
            if name not in families:
                others[name] = value
                continue
            # An empty label is no label (Prometheus drops it).
            labels = {k: v for k, v in labels.items() if v != ""}
            if set(labels) - {"server", "datname", "name"} or "server" not in labels:
                problems.append("%s: labels %s (want server, name and datname if any)" % (name, sorted(labels)))
            key = (labels.get("datname", ""), labels.get("name", ""))
            if key in scraped[name]:
                problems.append("%s: two series for datname=%r name=%r" % (name, key[0], key[1]))
            scraped[name][key] = value

    if others.get("pg_exporter_last_scrape_error", 0) != 0:
        problems.append("pg_exporter_last_scrape_error is %s" % others["pg_exporter_last_scrape_error"])
    for family, column in sorted(families.items()):
        want_type = "gauge" if column in GAUGES or column == "reset_epoch" else "counter"
        if types.get(family) != want_type:
            problems.append("%s: TYPE %s, want %s" % (family, types.get(family), want_type))
        got = scraped[family]
        for key in sorted(set(expected) - set(got)):
            problems.append("%s: no series for the view's row datname=%r name=%r" % (family, key[0], key[1]))
        for key in sorted(set(got) - set(expected)):
            problems.append("%s: a series for no row of the view: datname=%r name=%r" % (family, key[0], key[1]))
        for key in sorted(set(got) & set(expected)):
            want = float(expected[key][column])
            if got[key] != want:
                problems.append("%s{datname=%r, name=%r} = %r, the view has %r" % (family, key[0], key[1], got[key], want))
    if require_nonzero:
        for column in counters:
            if not any(float(row[column]) != 0 for row in expected.values()):
                problems.append("the traffic left %s zero in every row: nothing tested it" % column)
    if not expected:
        problems.append("the view has no rows")

    for problem in problems:
        print("FAIL: " + problem)
    if problems:
        return 1
    print("ok - %d rows (%s) x %d metrics equal to the view's: %s" % (
        len(expected), ", ".join(repr("%s/%s" % k) for k in sorted(expected)), len(families), ", ".join(sorted(families))))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (OSError, ValueError, KeyError, IndexError) as e:
        print("FAIL: %s" % e)
        sys.exit(2)
