#!/usr/bin/env python3
"""Plots and tables of the latest curated benchmark results, for the docs.

Reads one results folder written by bench/compare.sh (the CSVs of phases shm2,
tcp2 and shm4: one line per point, nccl-tests' columns) and writes, into OUT:

- busbw-PHASE.png: bus bandwidth against message size, one panel per
  collective, one line per library (OmniCCL, Open MPI, MPICH, Gloo);
- latency-8B.png: time per call at 8 bytes, per collective and library, for
  the 2-rank phases;
- tables-PHASE.md: the same numbers as Markdown tables (bus bandwidth at 1, 16
  and 256 MiB; time at 8 B), which docs/performance/index.md includes.

conf.py runs it at every docs build, so the pages always show the CSVs in the
tree. Needs matplotlib (docs/requirements.txt); uses the Agg backend, no display.

Usage: plot_results.py RESULTS_DIR OUT_DIR [--dpi N]
"""

import csv
import glob
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

PEERS = [("omniccl", "OmniCCL", "#d62728"), ("openmpi", "Open MPI", "#1f77b4"),
         ("mpich", "MPICH", "#2ca02c"), ("gloo", "Gloo", "#7f7f7f")]
COLLS = ["allreduce", "reduce_scatter", "allgather", "alltoall", "bcast", "reduce", "gather", "scatter"]
PHASES = {"shm2": "2 ranks, shared memory (Gloo: TCP)", "tcp2": "2 ranks, TCP forced (loopback)",
          "shm4": "4 ranks on 2 cores, shared memory (Gloo: TCP)"}


def load(results, phase):
    """{peer: {collective: {bytes: row}}} of one phase."""
    data = {}
    for path in sorted(glob.glob(os.path.join(results, phase, "*.csv"))):
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if not row.get("bytes") or row.get("check") not in ("0", None):
                    continue
                data.setdefault(row["peer"], {}).setdefault(row["collective"], {})[int(row["bytes"])] = row
    return data


def size_label(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def plot_busbw(data, phase, out, dpi):
    fig, axes = plt.subplots(2, 4, figsize=(13, 6), sharex=True)
    for ax, coll in zip(axes.flat, COLLS):
        for peer, label, color in PEERS:
            points = data.get(peer, {}).get(coll, {})
            xs = sorted(b for b in points if b >= 1024)
            if xs:
                ax.plot(xs, [float(points[b]["busbw_GBps"]) for b in xs], marker="o", label=label, color=color)
        ax.set_xscale("log", base=2)
        ax.set_xticks([1 << 16, 1 << 20, 1 << 24, 1 << 28], ["64K", "1M", "16M", "256M"])
        ax.set_title(coll)
        ax.grid(True, alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("message size (bytes)")
    for ax in axes[:, 0]:
        ax.set_ylabel("bus bandwidth (GB/s)")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper right", ncol=4)
    fig.suptitle(f"Bus bandwidth, {PHASES[phase]}", x=0.3)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(os.path.join(out, f"busbw-{phase}.png"), dpi=dpi)
    plt.close(fig)


def plot_latency(phases, out, dpi):
    fig, axes = plt.subplots(1, len(phases), figsize=(13, 4.5))
    colls = COLLS + ["barrier"]
    for ax, (phase, data) in zip(axes, phases):
        width = 0.2
        for k, (peer, label, color) in enumerate(PEERS):
            ys = []
            for coll in colls:
                row = data.get(peer, {}).get(coll, {}).get(8) or data.get(peer, {}).get(coll, {}).get(0)
                ys.append(float(row["time_us"]) if row else 0.0)
            ax.bar([i + (k - 1.5) * width for i in range(len(colls))], ys, width, label=label, color=color)
        ax.set_xticks(range(len(colls)))
        ax.set_xticklabels(colls, rotation=40, ha="right")
        ax.set_yscale("log")
        ax.set_ylabel("time per call at 8 B (µs, log)")
        ax.set_title(PHASES[phase])
        ax.grid(True, axis="y", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=4)
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    fig.savefig(os.path.join(out, "latency-8B.png"), dpi=dpi)
    plt.close(fig)


def tables(data, phase, out):
    present = [(p, label) for p, label, _ in PEERS if p in data]
    lines = []
    for size in (1 << 20, 16 << 20, 256 << 20):
        lines += [f"Bus bandwidth at {size_label(size)}, GB/s ({PHASES[phase]}):", "",
                  "| collective | " + " | ".join(label for _, label in present) + " |",
                  "| --- |" + " ---: |" * len(present)]
        for coll in COLLS:
            cells = []
            for p, _ in present:
                row = data[p].get(coll, {}).get(size)
                cells.append(f"{float(row['busbw_GBps']):.2f}" if row else "—")
            lines.append(f"| {coll} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [f"Time per call at 8 B, µs ({PHASES[phase]}; rooted collectives: mean over ranks):", "",
              "| collective | " + " | ".join(label for _, label in present) + " |",
              "| --- |" + " ---: |" * len(present)]
    for coll in COLLS + ["barrier"]:
        cells = []
        for p, _ in present:
            pts = data[p].get(coll, {})
            row = pts.get(8) or pts.get(16) or pts.get(0)
            cells.append(f"{float(row['time_us']):.2f}" if row else "—")
        lines.append(f"| {coll} | " + " | ".join(cells) + " |")
    with open(os.path.join(out, f"tables-{phase}.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    results, out = argv[1], argv[2]
    dpi = int(argv[argv.index("--dpi") + 1]) if "--dpi" in argv else 90
    os.makedirs(out, exist_ok=True)
    loaded = {}
    for phase in PHASES:
        data = load(results, phase)
        if not data:
            print(f"plot_results.py: no CSVs for phase {phase} in {results}", file=sys.stderr)
            return 1
        loaded[phase] = data
        plot_busbw(data, phase, out, dpi)
        tables(data, phase, out)
    plot_latency([(p, loaded[p]) for p in ("shm2", "tcp2")], out, dpi)
    print(f"plot_results.py: {len(PHASES)} phases from {results} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
