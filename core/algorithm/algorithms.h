// Algorithms: each moves data through an Engine that has begun an operation
// (engine.h defines transfer and step). Sizes are in bytes unless named
// `count` (elements of the operation's dtype). Buffers follow the collective's
// contract; none of these writes to an input buffer it does not own.
#pragma once

#include <cstddef>
#include <cstdint>

#include "algorithm/engine.h"

namespace omniccl::algo {

// all_reduce of src into dst (count elements; src may equal dst).
void all_reduce_ring(Engine& e, const char* src, char* dst, size_t count);
/// all_reduce_pipelined's chunk: 2 ranks, 16 and 256 MiB, interleaved runs
/// of 256 KiB, 512 KiB and 1 MiB were within 3% of each other; 1 MiB takes
/// the fewest steps.
inline constexpr size_t kPipelineChunk = size_t(1) << 20;
/// The ring's phases run on columns of chunks of `chunk_bytes` (chunk k of
/// every block), column k one phase behind column k-1, so that each partial
/// sum and reduced chunk goes on while it is still in the caches.
void all_reduce_pipelined(Engine& e, const char* src, char* dst, size_t count, size_t chunk_bytes);
// all_reduce, in place on buf (count elements).
void all_reduce_recursive_doubling(Engine& e, char* buf, size_t count);
void all_reduce_tree(Engine& e, char* buf, size_t count);
void all_reduce_direct(Engine& e, char* buf, size_t count);

// reduce_scatter: send holds size * count elements, recv count elements
// (recv may be send's own block).
void reduce_scatter_ring(Engine& e, const char* send, char* recv, size_t count);
void reduce_scatter_recursive_halving(Engine& e, const char* send, char* recv, size_t count);
void reduce_scatter_direct(Engine& e, const char* send, char* recv, size_t count);

// all_gather: `bytes` per rank; send may be recv's own block.
void all_gather_ring(Engine& e, const char* send, char* recv, size_t bytes);
/// all_gather_ring's phases on columns of chunks of `chunk_bytes`, column k
/// one phase behind column k-1, so that each received chunk is passed on
/// from the caches; 1 or 2 ranks: the ring.
void all_gather_pipelined(Engine& e, const char* send, char* recv, size_t bytes, size_t chunk_bytes);
void all_gather_bruck(Engine& e, const char* send, char* recv, size_t bytes);
/// Exchanges with member ^ k for k = 1, 2, 4, ..., each round doubling the
/// blocks held, straight into recv (no scratch); with n not a power of two,
/// the ranks fold as all_reduce's (patterns::Fold): an even rank below
/// 2 * extra gives its block to the next rank and gets the result from it.
void all_gather_recursive_doubling(Engine& e, const char* send, char* recv, size_t bytes);
void all_gather_direct(Engine& e, const char* send, char* recv, size_t bytes);

// broadcast of buf (bytes) from root.
void broadcast_tree(Engine& e, char* buf, size_t bytes, int root);
void broadcast_ring(Engine& e, char* buf, size_t bytes, int root);
void broadcast_direct(Engine& e, char* buf, size_t bytes, int root);

// reduce of send (count elements) into root's recv; send is never written.
void reduce_tree(Engine& e, const char* send, char* recv, size_t count, int root);
void reduce_direct(Engine& e, const char* send, char* recv, size_t count, int root);

// gather / scatter of `bytes` per rank.
void gather_tree(Engine& e, const char* send, char* recv, size_t bytes, int root);
void gather_direct(Engine& e, const char* send, char* recv, size_t bytes, int root);
void scatter_tree(Engine& e, const char* send, char* recv, size_t bytes, int root);
void scatter_direct(Engine& e, const char* send, char* recv, size_t bytes, int root);

// all_to_all of `bytes` per peer; send and recv do not overlap.
void all_to_all_pairwise(Engine& e, const char* send, char* recv, size_t bytes);
void all_to_all_direct(Engine& e, const char* send, char* recv, size_t bytes);

/// Barrier by pairwise exchanges with member ^ k for k = 1, 2, 4, ... (log2 n
/// rounds); with n not a power of two, the ranks fold as all_reduce's
/// (patterns::Fold): an even rank below 2 * extra checks in with the next
/// rank and waits for its release.
void barrier_recursive_doubling(Engine& e);
void barrier_dissemination(Engine& e);
void barrier_direct(Engine& e);

// v-variants (direct); counts and displacements in bytes, one per rank.
void all_gatherv_direct(Engine& e, const char* send, char* recv, const uint64_t* counts, const uint64_t* displs);
void all_to_allv_direct(Engine& e, const char* send, const uint64_t* send_counts, const uint64_t* send_displs,
                        char* recv, const uint64_t* recv_counts, const uint64_t* recv_displs);
void gatherv_direct(Engine& e, const char* send, uint64_t send_bytes, char* recv, const uint64_t* counts,
                    const uint64_t* displs, int root);
void scatterv_direct(Engine& e, const char* send, const uint64_t* counts, const uint64_t* displs, char* recv,
                     uint64_t recv_bytes, int root);

/// Prefix reductions (Hillis-Steele): in round k each rank sends its partial
/// result to rank r + 2^k and combines the one from rank r - 2^k on its
/// left, so after ceil(log2 n) rounds rank r holds x0 op ... op xr. Lower
/// ranks' values are always the left operand. scan: recv may equal send.
/// exscan: rank r > 0 gets x0 op ... op x(r-1) in recv (which may equal
/// send); rank 0's recv is not written.
void scan_recursive_doubling(Engine& e, const char* send, char* recv, size_t count);
void exscan_recursive_doubling(Engine& e, const char* send, char* recv, size_t count);

}  // namespace omniccl::algo
