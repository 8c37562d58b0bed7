// The compiled parts of Boost.Asio (with its TLS layer) and Boost.Beast,
// built once here instead of inline in every translation unit that
// includes them (for build time). drover_net defines
// BOOST_ASIO_SEPARATE_COMPILATION and BOOST_BEAST_SEPARATE_COMPILATION
// publicly, so every target that links it, and so may include Asio or
// Beast, sees the same declarations.
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
