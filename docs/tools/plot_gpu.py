#!/usr/bin/env python3
"""Plots of the latest GPU results, for the docs' performance page.

Reads a GPU results folder (bench/results/latest/gpu-h200) and writes, into OUT:

- gpu-kernels.png: the CUDA reduction kernels' bandwidth (bytes read plus
  written per second) against buffer size, with device-to-device cudaMemcpy;
- gpu-collectives.png: bus bandwidth of collectives on CUDA tensors against
  message size, 2 and 4 ranks on one GPU (the staged path).

The inputs are omniccl-cuda-kernel-bench's table (run3_kbench.txt) and
omniccl-bench's nccl-tests tables (run3_bench2.txt, run3_bench4.txt).

Usage: plot_gpu.py RESULTS_DIR OUT_DIR [--dpi N]
"""

import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

KERNELS = ["memcpy_d2d", "sum_float32", "sum_bfloat16", "sum_float16", "sum_fp8e4m3"]


def kernel_rates(path):
    """{kernel: [(bytes, GB/s)]} from the kernel bench's table."""
    rates = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 5 and parts[0].isdigit():
                rates.setdefault(parts[1], []).append((int(parts[0]), float(parts[3])))
    return rates


def collective_busbw(path):
    """{collective: [(bytes, busbw GB/s)]} from omniccl-bench's tables."""
    out, coll = {}, None
    with open(path) as f:
        for line in f:
            line = re.sub(r"^\[\d+\] ", "", line)
            m = re.match(r"# Collective: (\w+)", line)
            if m:
                coll = m.group(1)
                continue
            parts = line.split()
            if coll and len(parts) >= 9 and parts[0].isdigit():
                out.setdefault(coll, []).append((int(parts[0]), float(parts[7])))
    return out


def plot_kernels(rates, out, dpi):
    fig, ax = plt.subplots(figsize=(7, 4))
    for k in KERNELS:
        pts = sorted(rates.get(k, []))
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=k)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("buffer size (bytes)")
    ax.set_ylabel("GB/s (read + written)")
    ax.set_title("CUDA kernels on one H200")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "gpu-kernels.png"), dpi=dpi)
    plt.close(fig)


def plot_collectives(by_ranks, out, dpi):
    fig, axes = plt.subplots(1, len(by_ranks), figsize=(11, 4), sharey=True)
    for ax, (ranks, data) in zip(axes, by_ranks):
        for coll, pts in sorted(data.items()):
            pts = sorted(pts)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=coll)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_title(f"{ranks} ranks on one GPU (staged through host memory)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("bus bandwidth (GB/s)")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "gpu-collectives.png"), dpi=dpi)
    plt.close(fig)


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    results, out = argv[1], argv[2]
    dpi = int(argv[argv.index("--dpi") + 1]) if "--dpi" in argv else 90
    os.makedirs(out, exist_ok=True)
    rates = kernel_rates(os.path.join(results, "run3_kbench.txt"))
    colls = [(n, collective_busbw(os.path.join(results, f"run3_bench{n}.txt"))) for n in (2, 4)]
    if not rates or not all(d for _, d in colls):
        print(f"plot_gpu.py: no kernel or collective tables in {results}", file=sys.stderr)
        return 1
    plot_kernels(rates, out, dpi)
    plot_collectives(colls, out, dpi)
    print(f"plot_gpu.py: kernels and collectives from {results} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
