#!/usr/bin/env python3
"""bench/report.py - the ratio table of bench/compare.sh (Python 3, stdlib only).

Usage: report.py RESULTS_DIR [--markdown FILE] [--issue 12|4] [--spread DIR ...]

Reads what compare.sh wrote into RESULTS_DIR:
  memcpy.csv                 memcpy_bytes,reps,best_GBps,median_GBps
  shm2/*.csv tcp2/*.csv shm4/*.csv
                             peer,transport,collective,ranks,bytes,count,dtype,
                             iters,time_us,time_max_us,algbw_GBps,busbw_GBps,check
  blocked/*.csv              peer,transport,ranks,rank,wall_s,cpu_s,cpu_pct
  footprint/*.csv            omniccl-bench --footprint CSV
  machine.txt, load.txt      the machine and its load before each phase

and prints, for every target of issue 12 (the default; --issue 4 gives the
targets of the first round), one row per (collective, size):
OmniCCL's value, the best peer's (or the named peer's) value, the ratio
OmniCCL / peer and PASS or MISS. Bandwidth rows compare bus bandwidth
(higher is better, ratio must be >= the target); latency rows compare the
mean time per operation at the smallest size (8 B; lower is better, ratio
must be <= the target). Then the same folded to one row per target and
collective, the -c results (wrong elements per library), and the raw
numbers of every phase. --spread DIR... names the results folders of further
runs: issue 12's run-to-run spread of OmniCCL's own 16 MiB points (the
largest time over the smallest, minus one, across RESULTS_DIR and them) is
then one more target, and a table gives every library's spread of its
16 MiB points across the same runs (the machine's share). Writes the same
as Markdown to RESULTS_DIR/report.md (or FILE). Exit status 0 (a missed
target is a measurement, not an error); 2 if RESULTS_DIR has no data.
"""

import csv
import glob
import os
import sys

MIB = 1 << 20
BW_SIZES = [1 * MIB, 16 * MIB, 256 * MIB]
REDUCTIONS = ["allreduce", "reduce", "reduce_scatter"]
MOVEMENT = ["bcast", "scatter", "gather", "allgather", "alltoall"]
ALL = ["allreduce", "allgather", "bcast", "reduce", "reduce_scatter", "alltoall",
       "gather", "scatter", "barrier"]
OVERSUB = ["allreduce", "allgather", "bcast", "alltoall"]
PEERS = ["openmpi", "mpich", "gloo"]
MPIS = ["openmpi", "mpich"]


def size_name(b):
    """Human size: 8 B, 64 KiB, 1 MiB, 256 MiB."""
    if b >= MIB and b % MIB == 0:
        return "%d MiB" % (b // MIB)
    if b >= 1024 and b % 1024 == 0:
        return "%d KiB" % (b // 1024)
    return "%d B" % b


def read_csv(path):
    """Rows of a CSV file as dicts; [] if missing or empty. Lines that are not
    CSV rows of the header's width (a launcher's message) are skipped."""
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        lines = [ln for ln in f if "," in ln]
    if not lines:
        return []
    rows = list(csv.reader(lines))
    header = rows[0]
    return [dict(zip(header, r)) for r in rows[1:] if len(r) == len(header)]


def load_points(results):
    """{phase: {peer: {(collective, bytes): row}}} from the phase folders."""
    data = {}
    for phase in ("shm2", "tcp2", "shm4"):
        data[phase] = {}
        for path in sorted(glob.glob(os.path.join(results, phase, "*.csv"))):
            for row in read_csv(path):
                try:
                    key = (row["collective"], int(row["bytes"]))
                    row["time_us"] = float(row["time_us"])
                    row["busbw_GBps"] = float(row["busbw_GBps"])
                except (KeyError, ValueError):
                    continue
                data[phase].setdefault(row["peer"], {})[key] = row
    return data


def latency_row(points, coll):
    """The row of `coll` at its smallest size (8 B; barrier: 0 B), or None."""
    keys = [k for k in points if k[0] == coll]
    if not keys:
        return None
    return points[min(keys, key=lambda k: k[1])]


class Table:
    """Rows of the target table, with PASS/MISS/NO DATA counts."""

    def __init__(self):
        self.rows = []
        self.count = {"PASS": 0, "MISS": 0, "NO DATA": 0}

    def add(self, target, coll, size, omni, peer_name, peer, ratio, need, ok):
        """Adds one row; ok None means the data is missing."""
        verdict = "NO DATA" if ok is None else ("PASS" if ok else "MISS")
        self.count[verdict] += 1
        self.rows.append([target, coll, size, omni, peer_name, peer, ratio, need, verdict])


def fmt(v, unit):
    """A value with its unit, or n/a."""
    if v is None:
        return "n/a"
    if unit == "us":
        return "%.2f us" % v
    if unit == "GB/s":
        return "%.3f GB/s" % v
    if unit == "%":
        return "%.2f %%" % v
    if unit == "KiB":
        return "%.0f KiB" % v
    return str(v)


def best_peer(data, phase, coll, size, names, metric):
    """(peer, value) of the best peer among `names` at (coll, size):
    highest busbw or lowest time; size None = the latency point."""
    best = (None, None)
    for name in names:
        pts = data.get(phase, {}).get(name, {})
        row = latency_row(pts, coll) if size is None else pts.get((coll, size))
        if row is None:
            continue
        v = row[metric]
        if metric == "busbw_GBps" and v <= 0:
            continue
        if best[1] is None or (v > best[1] if metric == "busbw_GBps" else v < best[1]):
            best = (name, v)
    return best


def omni_value(data, phase, coll, size, metric):
    """OmniCCL's value at (coll, size) in `phase`; size None = latency point."""
    pts = data.get(phase, {}).get("omniccl", {})
    row = latency_row(pts, coll) if size is None else pts.get((coll, size))
    return None if row is None else row[metric]


def bw_rows(t, data, target, phase, colls, sizes, names, need):
    """Bandwidth rows: OmniCCL busbw / best busbw among `names` >= need."""
    for coll in colls:
        for size in sizes:
            o = omni_value(data, phase, coll, size, "busbw_GBps")
            pn, pv = best_peer(data, phase, coll, size, names, "busbw_GBps")
            if o is None or pv is None:
                t.add(target, coll, size_name(size), fmt(o, "GB/s"), pn or "-", fmt(pv, "GB/s"),
                      "n/a", ">= %.2f" % need, None)
                continue
            r = o / pv
            t.add(target, coll, size_name(size), fmt(o, "GB/s"), pn, fmt(pv, "GB/s"),
                  "%.2f" % r, ">= %.2f" % need, r >= need)


def lat_rows(t, data, target, phase, colls, names, need):
    """Latency rows at the smallest size: OmniCCL time / best time <= need."""
    for coll in colls:
        orow = latency_row(data.get(phase, {}).get("omniccl", {}), coll)
        pn, pv = best_peer(data, phase, coll, None, names, "time_us")
        size = size_name(orow and int(orow["bytes"]) or (0 if coll == "barrier" else 8))
        o = orow["time_us"] if orow else None
        if o is None or pv is None:
            t.add(target, coll, size, fmt(o, "us"), pn or "-", fmt(pv, "us"), "n/a",
                  "<= %.2f" % need, None)
            continue
        r = o / pv if pv > 0 else float("inf")
        t.add(target, coll, size, fmt(o, "us"), pn, fmt(pv, "us"), "%.2f" % r,
              "<= %.2f" % need, r <= need)


def blocked(results):
    """{peer label: max CPU % of a core over the ranks that were blocked}."""
    out = {}
    for path in sorted(glob.glob(os.path.join(results, "blocked", "*.csv"))):
        label = os.path.splitext(os.path.basename(path))[0]
        vals = [float(r["cpu_pct"]) for r in read_csv(path) if r.get("rank") not in (None, "0")]
        if vals:
            out[label] = max(vals)
    return out


def footprint(results):
    """{setting: (max comm KiB, max growth KiB, ops, ranks)} of OmniCCL."""
    out = {}
    for path in sorted(glob.glob(os.path.join(results, "footprint", "*.csv"))):
        rows = read_csv(path)
        if not rows:
            continue
        label = os.path.splitext(os.path.basename(path))[0]
        out[label] = (max(float(r["comm_kib"]) for r in rows),
                      max(float(r["growth_kib"]) for r in rows),
                      int(rows[0]["ops"]), int(rows[0]["ranks"]))
    return out


def memcpy_row(t, data, memcpy, target):
    """All_reduce at 256 MiB against single-thread memcpy bandwidth (>= 0.40)."""
    o = omni_value(data, "shm2", "allreduce", 256 * MIB, "busbw_GBps")
    if o is None or memcpy is None:
        t.add(target, "allreduce", "256 MiB", fmt(o, "GB/s"), "memcpy", fmt(memcpy, "GB/s"), "n/a",
              ">= 0.40", None)
    else:
        r = o / memcpy
        t.add(target, "allreduce", "256 MiB", fmt(o, "GB/s"), "memcpy", fmt(memcpy, "GB/s"), "%.2f" % r,
              ">= 0.40", r >= 0.40)


def measured(data, phase, colls):
    """The collectives of `colls` that `phase` measured for OmniCCL (shm4 may
    hold fewer than all)."""
    pts = data.get(phase, {}).get("omniccl", {})
    return [c for c in colls if any(k[0] == c for k in pts)] or colls


def point_times(runs, phase, lib, key):
    """The times of one point (phase, library, (collective, bytes)) in each
    run that measured it, missing and zero times left out."""
    vals = [r.get(phase, {}).get(lib, {}).get(key) for r in runs]
    return [v["time_us"] for v in vals if v is not None and v["time_us"] > 0]


def spread_rows(t, data, others):
    """Issue 12: OmniCCL's 16 MiB points vary <= 25% across runs."""
    runs = [data] + [load_points(d) for d in others]
    for phase in ("shm2", "tcp2", "shm4"):
        keys = sorted(k for k in data.get(phase, {}).get("omniccl", {}) if k[1] == 16 * MIB)
        for k in keys:
            vals = point_times(runs, phase, "omniccl", k)
            target = "R7 %s: 16 MiB run-to-run spread <= 25%% (%d runs)" % (phase, len(vals))
            if len(vals) < 2:
                t.add(target, k[0], "16 MiB", "n/a", "-", "-", "n/a", "<= 25 %", None)
                continue
            sp = max(vals) / min(vals) - 1.0
            t.add(target, k[0], "16 MiB", "%.0f-%.0f us" % (min(vals), max(vals)), "-", "-",
                  "%.0f %%" % (100 * sp), "<= 25 %", sp <= 0.25)


def library_spreads(data, others):
    """Every library's run-to-run spread of its 16 MiB points, the machine's
    share of R7: rows [phase, library, runs, "k of m" collectives within 25 %,
    median spread, largest spread (collective)], for each library measured at
    16 MiB in two runs or more."""
    runs = [data] + [load_points(d) for d in others]
    rows = []
    for phase in ("shm2", "tcp2", "shm4"):
        libs = sorted({lib for r in runs for lib in r.get(phase, {})})
        for lib in libs:
            spreads, n_runs = [], 0
            keys = sorted({k for r in runs for k in r.get(phase, {}).get(lib, {}) if k[1] == 16 * MIB})
            for k in keys:
                vals = point_times(runs, phase, lib, k)
                if len(vals) >= 2:
                    spreads.append((max(vals) / min(vals) - 1.0, k[0]))
                    n_runs = max(n_runs, len(vals))
            if not spreads:
                continue
            sp = sorted(s for s, _ in spreads)
            mid = len(sp) // 2
            median = sp[mid] if len(sp) % 2 else (sp[mid - 1] + sp[mid]) / 2
            worst = max(spreads)
            rows.append([phase, lib, n_runs, "%d of %d" % (sum(1 for s in sp if s <= 0.25), len(sp)),
                         "%.0f %%" % (100 * median), "%.0f %% (%s)" % (100 * worst[0], worst[1])])
    return rows


def blocked_rows(t, cpu, prefix):
    """A rank blocked ~1 s in a barrier uses <= 5% of a core (shm; tcp too)."""
    o = cpu.get("omniccl")
    g = cpu.get("gloo")
    t.add(prefix + " rank blocked 1 s in barrier: <= 5% of a core", "barrier", "-", fmt(o, "%"),
          "gloo", fmt(g, "%"), "n/a" if o is None else "%.2f %%" % o, "<= 5 %",
          None if o is None else o <= 5.0)
    o = cpu.get("omniccl-tcp")
    if o is not None:
        t.add(prefix + " (tcp) rank blocked 1 s in barrier: <= 5% of a core", "barrier", "-",
              fmt(o, "%"), "gloo", fmt(g, "%"), "%.2f %%" % o, "<= 5 %", o <= 5.0)


def build_targets_12(results, data, spread_dirs):
    """The target table of issue 12 (CPU performance, round 2): against the
    best of Open MPI and MPICH, 2 ranks and 4 ranks on 2 cores."""
    t = Table()
    mem = read_csv(os.path.join(results, "memcpy.csv"))
    memcpy = float(mem[0]["best_GBps"]) if mem else None
    four = measured(data, "shm4", ALL)
    bw_rows(t, data, "R1 shm 2r: busbw >= 1.0x best MPI", "shm2", ALL[:-1], BW_SIZES, MPIS, 1.0)
    bw_rows(t, data, "R1 shm 4r/2 cores: busbw >= 1.0x best MPI", "shm4", [c for c in four if c != "barrier"],
            BW_SIZES, MPIS, 1.0)
    bw_rows(t, data, "R2 reductions shm 2r: busbw >= 1.5x best MPI", "shm2", REDUCTIONS, BW_SIZES[1:], MPIS, 1.5)
    bw_rows(t, data, "R2 reductions shm 4r/2 cores: busbw >= 1.5x best MPI", "shm4",
            [c for c in REDUCTIONS if c in four], BW_SIZES[1:], MPIS, 1.5)
    memcpy_row(t, data, memcpy, "R3 allreduce 256 MiB >= 40% of memcpy")
    lat_rows(t, data, "R4 latency 8 B shm 2r: time <= Open MPI", "shm2", ALL, ["openmpi"], 1.0)
    lat_rows(t, data, "R4 latency 8 B shm 4r/2 cores: time <= Open MPI", "shm4", four, ["openmpi"], 1.0)
    cpu = blocked(results)
    blocked_rows(t, cpu, "R5")
    bw_rows(t, data, "R6 tcp: busbw >= 1.0x Open MPI (tcp)", "tcp2", ALL[:-1], BW_SIZES, ["openmpi"], 1.0)
    lat_rows(t, data, "R6 tcp latency 8 B: time <= Open MPI (tcp)", "tcp2", ALL, ["openmpi"], 1.0)
    if spread_dirs:
        spread_rows(t, data, spread_dirs)
    return t, memcpy, cpu, footprint(results)


def build_targets(results, data):
    """The target table of issue 4."""
    t = Table()
    mem = read_csv(os.path.join(results, "memcpy.csv"))
    memcpy = float(mem[0]["best_GBps"]) if mem else None

    bw_rows(t, data, "T1 reductions shm 2r: busbw >= 2x best peer", "shm2", REDUCTIONS,
            BW_SIZES, PEERS, 2.0)
    memcpy_row(t, data, memcpy, "T2 allreduce 256 MiB >= 40% of memcpy")
    bw_rows(t, data, "T3 data movement shm 2r: busbw >= 1.2x best peer", "shm2", MOVEMENT,
            BW_SIZES[1:], PEERS, 1.2)
    bw_rows(t, data, "T3 data movement shm 2r: busbw >= 1.0x best peer", "shm2", MOVEMENT,
            BW_SIZES[:1], PEERS, 1.0)
    lat_rows(t, data, "T4 latency 8 B shm 2r: time <= best peer", "shm2", ALL, PEERS, 1.0)
    lat_rows(t, data, "T5 4 ranks/2 cores latency 8 B: time <= Open MPI", "shm4", OVERSUB,
             ["openmpi"], 1.0)
    bw_rows(t, data, "T5 4 ranks/2 cores: busbw >= 1.5x best peer", "shm4", OVERSUB, BW_SIZES,
            PEERS, 1.5)

    cpu = blocked(results)
    blocked_rows(t, cpu, "T6")

    bw_rows(t, data, "T7 tcp: busbw >= 1.5x Gloo", "tcp2", ALL[:-1], BW_SIZES, ["gloo"], 1.5)
    bw_rows(t, data, "T7 tcp: busbw >= 1.0x Open MPI (tcp)", "tcp2", ALL[:-1], BW_SIZES,
            ["openmpi"], 1.0)
    lat_rows(t, data, "T7 tcp latency 8 B: time <= 1.5x Open MPI (tcp)", "tcp2", ALL,
             ["openmpi"], 1.5)

    fp = footprint(results)
    if not fp:
        t.add("T8 memory: no growth over 10,000 ops", "allreduce", "1 MiB", "n/a", "-", "-",
              "n/a", "growth <= 0", None)
    for label, (comm, growth, ops, ranks) in fp.items():
        t.add("T8 memory (%s): no growth over %d ops" % (label, ops), "allreduce", "1 MiB",
              "comm %s, growth %+.0f KiB" % (fmt(comm, "KiB"), growth), "-", "-",
              "%+.0f KiB" % growth, "growth <= 0", growth <= 0)
    return t, memcpy, cpu, fp


def compact_rows(t):
    """The target table folded to one row per (target, collective): every
    size's ratio and verdict in one cell, in the order measured."""
    out, index = [], {}
    for target, coll, size, _o, peer_name, _p, ratio, need, verdict in t.rows:
        key = (target, coll)
        if key not in index:
            index[key] = len(out)
            out.append([target, coll, need, []])
        who = "" if peer_name in ("-", "memcpy") or target[:2] in ("T6", "R5") else " vs " + peer_name
        out[index[key]][3].append("%s: %s%s %s" % (size, ratio, who, verdict))
    return [r[:3] + ["; ".join(r[3])] for r in out]


def raw_tables(data):
    """Per phase: every (collective, size) with each peer's time and busbw."""
    out = []
    for phase in ("shm2", "tcp2", "shm4"):
        peers = [p for p in ["omniccl"] + PEERS if p in data.get(phase, {})]
        if not peers:
            continue
        keys = sorted({k for p in peers for k in data[phase][p]},
                      key=lambda k: (ALL.index(k[0]) if k[0] in ALL else 99, k[1]))
        header = ["collective", "size"] + ["%s us | GB/s" % p for p in peers]
        rows = []
        for k in keys:
            row = [k[0], size_name(k[1])]
            for p in peers:
                r = data[phase][p].get(k)
                row.append("-" if r is None else "%.2f | %.3f" % (r["time_us"], r["busbw_GBps"]))
            rows.append(row)
        out.append((phase, header, rows))
    return out


def text_table(header, rows):
    """A fixed-width text table."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: "  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip()
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def md_table(header, rows):
    """A Markdown table."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    return "\n".join(out)


def main(argv):
    """Prints the report of the results folder argv[1]."""
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    results = argv[1]
    md_path = os.path.join(results, "report.md")
    issue, spread_dirs = "12", []
    rest = argv[2:]
    while rest:
        if rest[0] == "--markdown" and len(rest) >= 2:
            md_path, rest = rest[1], rest[2:]
        elif rest[0] == "--issue" and len(rest) >= 2 and rest[1] in ("12", "4"):
            issue, rest = rest[1], rest[2:]
        elif rest[0] == "--spread" and len(rest) >= 2:
            rest = rest[1:]
            while rest and not rest[0].startswith("--"):
                spread_dirs.append(rest[0])
                rest = rest[1:]
        else:
            print("report.py: unknown argument %r\n%s" % (rest[0], __doc__), file=sys.stderr)
            return 2
    data = load_points(results)
    if not any(data[p] for p in data):
        print("report.py: no results in %s" % results, file=sys.stderr)
        return 2
    if issue == "12":
        t, memcpy, cpu, fp = build_targets_12(results, data, spread_dirs)
    else:
        t, memcpy, cpu, fp = build_targets(results, data)
    checked = {}
    for phase in data:
        for peer, pts in data[phase].items():
            c = checked.setdefault(peer, [0, 0, 0])  # points, checked, wrong
            for row in pts.values():
                c[0] += 1
                if row.get("check", "N/A") != "N/A":
                    c[1] += 1
                    c[2] += int(float(row["check"]))
    machine = {}
    mpath = os.path.join(results, "machine.txt")
    if os.path.exists(mpath):
        with open(mpath) as f:
            machine = dict(ln.rstrip("\n").split("=", 1) for ln in f if "=" in ln)
    loads = []
    lpath = os.path.join(results, "load.txt")
    if os.path.exists(lpath):
        with open(lpath) as f:
            loads = [ln.strip() for ln in f if ln.strip()]

    header = ["target", "collective", "size", "OmniCCL", "vs", "peer", "ratio", "need", "result"]
    summary = "%d PASS, %d MISS, %d NO DATA" % (t.count["PASS"], t.count["MISS"], t.count["NO DATA"])
    about = ["date: %s" % machine.get("date_utc", "?"),
             "machine: %s, %s cores, %s, kernel %s" % (machine.get("cpu", "?"), machine.get("cores", "?"),
                                                        machine.get("mem", "?"), machine.get("kernel", "?")),
             "peers: Open MPI %s, MPICH %s, Gloo %s; OmniCCL %s" % (
                 machine.get("openmpi", "?"), machine.get("mpich", "?"), machine.get("gloo", "?"),
                 machine.get("omniccl", "?")),
             "memcpy (1 thread, 256 MiB): %s" % fmt(memcpy, "GB/s"),
             "blocked-CPU (max % of a core over blocked ranks): " +
             ", ".join("%s %.2f%%" % (k, v) for k, v in sorted(cpu.items())),
             "footprint: " + ", ".join("%s: communicator %.0f KiB, growth %+.0f KiB over %d ops" %
                                       (k, v[0], v[1], v[2]) for k, v in sorted(fp.items())),
             "results checked (-c): " + ", ".join(
                 "%s %d of %d points, %d wrong elements" % (p, v[1], v[0], v[2])
                 for p, v in sorted(checked.items())),
             "comparison took %s s" % machine.get("elapsed_s", "?")]
    print("\n".join("# " + a for a in about))
    for ln in loads:
        print("# load: " + ln)
    print()
    print("Targets of issue %s (ratio = OmniCCL / peer;" % issue, end=" ")
    print(" bandwidth = nccl-tests bus bandwidth, latency = mean "
          "time per op):")
    print(text_table(header, t.rows))
    print("\nSummary: " + summary + "\n")
    cheader = ["target", "collective", "need", "size: ratio vs peer, result"]
    compact = compact_rows(t)
    print("The same, one row per target and collective:")
    print(text_table(cheader, compact))
    print()
    sheader = ["phase", "library", "runs", "16 MiB points within 25 %", "median spread", "largest"]
    spreads = library_spreads(data, spread_dirs) if issue == "12" and spread_dirs else []
    stitle = ("Run-to-run spread of every library's 16 MiB points (largest time over the smallest, "
              "minus one; OmniCCL's is target R7, the others show the machine's share):")
    if spreads:
        print(stitle)
        print(text_table(sheader, spreads))
        print()
    raws = raw_tables(data)
    for phase, h, rows in raws:
        print("Phase %s (time us | busbw GB/s):" % phase)
        print(text_table(h, rows))
        print()

    with open(md_path, "w") as f:
        f.write("\n".join("- " + a for a in about) + "\n")
        for ln in loads:
            f.write("- load: `%s`\n" % ln)
        f.write("\n" + md_table(cheader, compact) + "\n\n**Summary:** " + summary + "\n")
        if spreads:
            f.write("\n" + stitle + "\n\n" + md_table(sheader, spreads) + "\n")
        f.write("\nEvery row:\n\n" + md_table(header, t.rows) + "\n")
        for phase, h, rows in raws:
            f.write("\nPhase `%s` (time us | busbw GB/s):\n\n" % phase + md_table(h, rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
