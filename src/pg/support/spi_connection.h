// A call's SPI connection, made only when the call first needs it
// (spi_connection.cpp). ratelimit_limit and ratelimit_check on a limit whose
// config the backend's caches hold, in a storage whose steps run no SQL,
// allocate nothing and run no statement: they never connect, and save
// SPI_connect and SPI_finish (two memory contexts made and deleted) per
// call. Whatever may run SQL, read the catalog or allocate asks for the
// connection first (NeedSpi), so from then on SPI's memory rule holds as
// for an eager connection (fn_args.h): what is allocated goes with
// SPI_finish.
//
// The state lives in the call's own frame and is passed down by pointer,
// never kept in a static: a nested call (reached through the SQL of an
// outer one, which is then connected) has its own, and an error that ends
// a call ends its frame with it (the (sub)transaction's abort cleans up
// SPI, as for any connection).
#pragma once

namespace ratelimit_pg {

struct SpiConnection {
  bool connected;
};

// Connects SPI for the call, unless it is connected. nullptr: the caller
// connected it before the call's first step (EnterCallContext).
void NeedSpi(SpiConnection* spi);
// Finishes the connection, if the call made one.
void FinishSpi(SpiConnection* spi);

}  // namespace ratelimit_pg
