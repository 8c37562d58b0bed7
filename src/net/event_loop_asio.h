// Internal to src/net: the asio io_context behind an EventLoop. Only the
// .cc files of src/net that already compile Asio include this.
#ifndef DROVER_NET_EVENT_LOOP_ASIO_H_
#define DROVER_NET_EVENT_LOOP_ASIO_H_

#include <boost/asio/io_context.hpp>

#include "net/event_loop.h"

namespace drover::net {

boost::asio::io_context& IoContextOf(EventLoop& loop);

}  // namespace drover::net

#endif  // DROVER_NET_EVENT_LOOP_ASIO_H_
