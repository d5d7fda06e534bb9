// The operations of a communicator: validate (synchronously, before anything
// is sent), then queue or run the chosen algorithm. `op` is an occl_red_op_t
// value; optional buffers (a non-root's recvbuf) are std::nullopt.
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

WorkPtr send(Communicator& c, const TensorView& t, int peer, bool async);
WorkPtr recv(Communicator& c, const TensorView& t, int peer, bool async);
WorkPtr broadcast(Communicator& c, const TensorView& t, int root, bool async);
WorkPtr scatter(Communicator& c, const OptTensor& send, const TensorView& recv, int root, bool async);
WorkPtr gather(Communicator& c, const TensorView& send, const OptTensor& recv, int root, bool async);
WorkPtr reduce(Communicator& c, const TensorView& send, const OptTensor& recv, int op, int root, bool async);
WorkPtr all_reduce(Communicator& c, const TensorView& send, const TensorView& recv, int op, bool async);
WorkPtr all_gather(Communicator& c, const TensorView& send, const TensorView& recv, bool async);
WorkPtr reduce_scatter(Communicator& c, const TensorView& send, const TensorView& recv, int op, bool async);
WorkPtr all_to_all(Communicator& c, const TensorView& send, const TensorView& recv, bool async);
WorkPtr barrier(Communicator& c, bool async);

/// Counts and displacements in elements; empty displs = packed.
WorkPtr all_gatherv(Communicator& c, const TensorView& send, const TensorView& recv, std::vector<int64_t> counts,
                    std::vector<int64_t> displs, bool async);
WorkPtr all_to_allv(Communicator& c, const TensorView& send, std::vector<int64_t> send_counts,
                    std::vector<int64_t> send_displs, const TensorView& recv, std::vector<int64_t> recv_counts,
                    std::vector<int64_t> recv_displs, bool async);
WorkPtr gatherv(Communicator& c, const TensorView& send, const OptTensor& recv, std::vector<int64_t> counts,
                std::vector<int64_t> displs, int root, bool async);
WorkPtr scatterv(Communicator& c, const OptTensor& send, std::vector<int64_t> counts, std::vector<int64_t> displs,
                 const TensorView& recv, int root, bool async);

}  // namespace omniccl::coll
