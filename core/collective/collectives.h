// The operations of a communicator: validate (synchronously, before anything
// is sent), then queue or run the chosen algorithm. `op` is an occl_red_op_t
// value; optional buffers (a non-root's recvbuf) are std::nullopt. The caller
// holds a Communicator::IssueGuard on `c` for the whole call (the C API's
// calls do): a blocking collective runs without entering the issuer again.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "communicator/communicator.h"
#include "tensor/tensor.h"

namespace omniccl::coll {

using WorkPtr = std::shared_ptr<Work>;
using OptTensor = std::optional<TensorView>;

WorkPtr send(Communicator& c, const TensorView& t, int peer, const CallOptions& call);
WorkPtr recv(Communicator& c, const TensorView& t, int peer, const CallOptions& call);
/// Tagged forms (send/recv use tag 0). source may be kAnySource, tag kAnyTag
/// (recv only), either peer kProcNull. A blocking recv fills *status (if
/// given) when it ends, also when it fails with kTruncated.
/// Throws kInvalidArgument for a peer or tag a send (is_send) or recv refuses.
void check_p2p_args(const Communicator& c, int peer, int tag, bool is_send);
WorkPtr send_tagged(Communicator& c, const TensorView& t, int peer, int tag, const CallOptions& call);
/// A synchronous send (MPI_Ssend): completes once a receive has matched it
/// (communicator/p2p_match.h).
WorkPtr ssend_tagged(Communicator& c, const TensorView& t, int peer, int tag, const CallOptions& call);
/// MPI_Mrecv / MPI_Imrecv (Communicator::mrecv) of `message`, which becomes
/// kMessageNull once taken: after the tensor's checks, which leave it held
/// for another try. A CUDA tensor takes it on the staged path, ordered on
/// the call's stream (a blocking call's status is the matched probe's).
WorkPtr mrecv(Communicator& c, uint64_t& message, const TensorView& t, const CallOptions& call, RecvStatus* status);
WorkPtr recv_tagged(Communicator& c, const TensorView& t, int source, int tag, const CallOptions& call,
                    RecvStatus* status);
WorkPtr broadcast(Communicator& c, const TensorView& t, int root, const CallOptions& call);
WorkPtr scatter(Communicator& c, const OptTensor& send, const TensorView& recv, int root, const CallOptions& call);
WorkPtr gather(Communicator& c, const TensorView& send, const OptTensor& recv, int root, const CallOptions& call);
WorkPtr reduce(Communicator& c, const TensorView& send, const OptTensor& recv, int op, int root,
               const CallOptions& call);
WorkPtr all_reduce(Communicator& c, const TensorView& send, const TensorView& recv, int op, const CallOptions& call);
WorkPtr all_gather(Communicator& c, const TensorView& send, const TensorView& recv, const CallOptions& call);
WorkPtr reduce_scatter(Communicator& c, const TensorView& send, const TensorView& recv, int op,
                       const CallOptions& call);
WorkPtr all_to_all(Communicator& c, const TensorView& send, const TensorView& recv, const CallOptions& call);
/// Prefix reductions (inclusive, exclusive) in rank order; exscan leaves
/// rank 0's recv as it was. AVG and PREMUL_SUM: kInvalidArgument.
WorkPtr scan(Communicator& c, const TensorView& send, const TensorView& recv, int op, const CallOptions& call);
WorkPtr exscan(Communicator& c, const TensorView& send, const TensorView& recv, int op, const CallOptions& call);
WorkPtr barrier(Communicator& c, const CallOptions& call);

/// Counts and displacements in elements; empty displs = packed.
WorkPtr all_gatherv(Communicator& c, const TensorView& send, const TensorView& recv, std::vector<int64_t> counts,
                    std::vector<int64_t> displs, const CallOptions& call);
WorkPtr all_to_allv(Communicator& c, const TensorView& send, std::vector<int64_t> send_counts,
                    std::vector<int64_t> send_displs, const TensorView& recv, std::vector<int64_t> recv_counts,
                    std::vector<int64_t> recv_displs, const CallOptions& call);
WorkPtr gatherv(Communicator& c, const TensorView& send, const OptTensor& recv, std::vector<int64_t> counts,
                std::vector<int64_t> displs, int root, const CallOptions& call);
WorkPtr scatterv(Communicator& c, const OptTensor& send, std::vector<int64_t> counts, std::vector<int64_t> displs,
                 const TensorView& recv, int root, const CallOptions& call);

}  // namespace omniccl::coll
