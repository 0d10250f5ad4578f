// Asio and Beast compiled once for the whole program (ARCHITECTURE: compile time on 2 cores).
#include <boost/asio/impl/src.hpp>
#include <boost/beast/src.hpp>
