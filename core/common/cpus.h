// The CPUs a rank may run on, as the text ranks swap at setup, and how many
// distinct CPUs the ranks of one host have between them.
//
// Why it matters: whether the ranks of a host outnumber its cores decides how
// a rank waits (spin, or yield at once) and whether a broadcast reads by
// reference. A launcher that binds (mpirun binds each of 2 ranks to a core of
// its own; srun --cpu-bind, taskset per rank) gives every rank a one-CPU
// mask, so one rank's own mask says nothing about the others: only the union
// of the ranks' masks does (two ranks bound to cores 0 and 1 have 2 CPUs;
// two ranks bound to core 0 share 1).
//
// The text is Linux's cpulist format, as in /proc/self/status
// (Cpus_allowed_list): "0-3,8". CPU numbers mean the same to every process of
// one host, which is where the lists are compared.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace omniccl::cpus {

/// Largest CPU number a list may name (a malformed list cannot make a huge set).
inline constexpr int kMaxCpu = 1 << 16;

/// The CPUs the calling thread may run on (sched_getaffinity), as a cpulist:
/// "0-3,8". When the kernel does not say: every online CPU ("0-N"). Never "".
std::string affinity_text();

/// Lets the calling thread run on every CPU of the machine that the
/// process's cpuset permits (sched_setaffinity with all configured CPUs; the
/// kernel drops those the cpuset forbids). For measurements that need two
/// cores in a rank its launcher bound to one (the copy calibration); call it
/// on a thread of its own, as the mask stays. False when the kernel refused.
bool allow_every_cpu();

/// Parses a cpulist ("0-3,8": numbers and ascending ranges, comma-separated,
/// each at most kMaxCpu) into sorted, distinct CPU numbers. Returns false,
/// leaving *out empty, when the text is malformed or empty.
bool parse(const std::string& text, std::vector<int>* out);

/// The number of distinct CPUs in the union of the lists; 0 (unknown) when
/// any list is malformed or empty.
int union_count(std::span<const std::string> lists);

}  // namespace omniccl::cpus
