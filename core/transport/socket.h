// The transports' names for the socket layer in common/net.h (one layer for
// bootstrap and transports, IPv4 and IPv6 alike).
#pragma once

#include "common/net.h"

namespace omniccl::transport {

using net::accept_until;
using net::connect_to;
using net::listen_tcp;
using net::listen_unix;
using net::read_all;
using net::set_nonblocking;
using net::SocketAddress;
using net::tune_data_socket;
using net::write_all;

}  // namespace omniccl::transport
