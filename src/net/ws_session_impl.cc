// The reading, writing and closing of WsSessionImpl (ws_session_impl.h),
// compiled once for each layer under the WebSocket that the server and the
// client use.
#include "net/ws_session_impl.h"

namespace drover::net::internal {

template <class NextLayer>
void WsSessionImpl<NextLayer>::Close(std::string reason) {
  asio::post(ws_.get_executor(), [self = this->shared_from_this(), r = std::move(reason)]() mutable {
    if (self->closing_ || self->closed_) return;
    self->closing_ = true;
    self->close_reason_ = websocket::close_reason(websocket::close_code::normal, r.substr(0, 100));
    if (!self->writing_) self->SendClose();
  });
}

template <class NextLayer>
void WsSessionImpl<NextLayer>::Abort() {
  asio::post(ws_.get_executor(), [self = this->shared_from_this()] {
    self->Finish(Unavailable("connection aborted: server stopping"));
  });
}

template <class NextLayer>
void WsSessionImpl<NextLayer>::Enqueue(bool binary, std::string message) {
  posted_bytes_ += message.size();
  asio::post(ws_.get_executor(),
             [self = this->shared_from_this(), binary, m = std::move(message)]() mutable {
               self->DoEnqueue(binary, std::move(m));
             });
}

template <class NextLayer>
void WsSessionImpl<NextLayer>::DoEnqueue(bool binary, std::string message) {
  posted_bytes_ -= message.size();
  if (closing_ || closed_) return;
  if (queued_bytes_ + message.size() > max_queue_) {
    Finish(ResourceExhausted("peer " + remote_ + " is not reading: more than " +
                             std::to_string(max_queue_) + " bytes queued"));
    return;
  }
  queued_bytes_ += message.size();
  queue_.push_back({binary, std::move(message)});
  if (!writing_) WriteNext();
}

template <class NextLayer>
void WsSessionImpl<NextLayer>::WriteNext() {
  if (closed_) return;
  if (queue_.empty()) {
    writing_ = false;
    if (closing_) return SendClose();
    if (on_drained_ && posted_bytes_.load() == 0) on_drained_();
    return;
  }
  writing_ = true;
  ws_.binary(queue_.front().binary);
  ws_.async_write(asio::buffer(queue_.front().data),
                  [self = this->shared_from_this()](beast::error_code ec, size_t) {
                    if (self->closed_) {
                      self->writing_ = false;
                      self->queue_.clear();
                      return;
                    }
                    self->queued_bytes_ -= self->queue_.front().data.size();
                    self->queue_.pop_front();
                    if (ec) {
                      self->Finish(Unavailable("write to " + self->remote_ + " failed: " +
                                               ec.message()));
                      return;
                    }
                    self->WriteNext();
                  });
}

template <class NextLayer>
void WsSessionImpl<NextLayer>::SendClose() {
  if (close_sent_ || closed_) return;
  close_sent_ = true;
  ws_.async_close(close_reason_, [self = this->shared_from_this()](beast::error_code ec) {
    if (ec && self->close_status_.ok()) {
      self->Finish(Unavailable("closing the connection to " + self->remote_ +
                               " failed: " + ec.message()));
      return;
    }
    self->Finish(self->close_status_);
  });
}

template <class NextLayer>
void WsSessionImpl<NextLayer>::FailWithClose(websocket::close_code code, Status why) {
  spdlog::warn("websocket {} ({}): {}", id_, remote_, why.ToString());
  closing_ = true;
  // Drop unsent messages, but keep the one being written: its completion
  // handler still refers to it.
  while (queue_.size() > (writing_ ? 1u : 0u)) {
    queued_bytes_ -= queue_.back().data.size();
    queue_.pop_back();
  }
  close_reason_ = websocket::close_reason(code, why.message().substr(0, 100));
  close_status_ = std::move(why);
  if (close_sent_) return Finish(close_status_);
  SendClose();
}

template <class NextLayer>
void WsSessionImpl<NextLayer>::ReadNext() {
  ws_.async_read_some(buffer_, kReadChunk, [self = this->shared_from_this()](beast::error_code ec, size_t) {
    if (self->closed_) return;
    if (ec) {
      // Our own close is in flight: its completion finishes the session.
      if (self->close_sent_ && ec == asio::error::operation_aborted) return;
      self->Finish(self->StatusForReadError(ec));
      return;
    }
    if (self->buffer_.size() > self->max_message_) {
      self->FailWithClose(websocket::close_code::too_big,
                          ResourceExhausted("message from " + self->remote_ + " exceeds " +
                                            std::to_string(self->max_message_) + " bytes"));
      return;
    }
    if (!self->ws_.is_message_done()) return self->ReadNext();
    std::string message = beast::buffers_to_string(self->buffer_.data());
    self->buffer_.consume(self->buffer_.size());
    if (self->ws_.got_text()) {
      if (self->on_text_) self->on_text_(std::move(message));
    } else if (self->on_binary_) {
      self->on_binary_(std::move(message));
    }
    if (self->closed_) return;
    if (!self->pacer_) return self->ReadNext();
    self->pacer_->Next([self] {
      if (!self->closed_) self->ReadNext();
    });
  });
}

template <class NextLayer>
Status WsSessionImpl<NextLayer>::StatusForReadError(beast::error_code ec) {
  if (ec == websocket::error::closed) {
    // The peer closed; a code other than "normal" says why.
    const websocket::close_reason& reason = ws_.reason();
    if (reason.code == websocket::close_code::normal || reason.code == websocket::close_code::none) {
      return Status::Ok();
    }
    std::string why = "closed by " + remote_ + " with code " + std::to_string(reason.code);
    if (!reason.reason.empty()) why += " (" + std::string(reason.reason.c_str()) + ")";
    if (reason.code == websocket::close_code::too_big) return ResourceExhausted(why);
    return Unavailable(why);
  }
  if (ec == websocket::error::message_too_big || ec == beast::http::error::buffer_overflow) {
    return ResourceExhausted("message from " + remote_ + " exceeds the size limit");
  }
  if (ec == beast::error::timeout) return Unavailable("connection to " + remote_ + " timed out");
  if (ec.category() == websocket::make_error_code(websocket::error::closed).category()) {
    return InvalidArgument("protocol error from " + remote_ + ": " + ec.message());
  }
  return Unavailable("connection to " + remote_ + " lost: " + ec.message());
}

template <class NextLayer>
void WsSessionImpl<NextLayer>::Finish(Status status) {
  if (closed_) return;
  closed_ = true;
  // Keep the message being written: the write in flight still reads it
  // until its completion handler runs (which then drops it).
  while (queue_.size() > (writing_ ? 1u : 0u)) queue_.pop_back();
  queued_bytes_ = 0;
  if (status.ok() || status.code() == StatusCode::kUnavailable) {
    // A peer that went away (a CLI done following events, a worker
    // restarting) is ordinary here; the session's owner says what it
    // means (the worker channel logs a worker's disconnection, a client
    // its own lost connection). Protocol errors and size limits warn.
    spdlog::debug("websocket {} ({}) closed: {}", id_, remote_, status.ToString());
  } else {
    spdlog::warn("websocket {} ({}) closed: {}", id_, remote_, status.ToString());
  }
  beast::error_code ignored;
  beast::get_lowest_layer(ws_).socket().shutdown(asio::socket_base::shutdown_both, ignored);
  beast::get_lowest_layer(ws_).socket().close(ignored);
  if (finish_hook_) std::exchange(finish_hook_, nullptr)();
  // Dropping the callbacks breaks cycles through captured shared_ptrs.
  on_text_ = nullptr;
  on_binary_ = nullptr;
  on_drained_ = nullptr;
  pacer_ = nullptr;
  if (auto fn = std::exchange(on_close_, nullptr)) fn(status);
}

template class WsSessionImpl<TcpStream>;
template class WsSessionImpl<TlsStream>;
template class WsSessionImpl<LocalStream>;

}  // namespace drover::net::internal
