// A call's SPI connection, made when first needed (spi_connection.h).
#include "support/spi_connection.h"

extern "C" {
#include "postgres.h"

#include "executor/spi.h"
}

namespace ratelimit_pg {

void NeedSpi(SpiConnection* spi) {
  if (spi == nullptr || spi->connected) return;
  if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "ratelimit: SPI_connect failed");
  spi->connected = true;
}

void FinishSpi(SpiConnection* spi) {
  if (!spi->connected) return;
  spi->connected = false;
  if (SPI_finish() != SPI_OK_FINISH) elog(ERROR, "ratelimit: SPI_finish failed");
}

}  // namespace ratelimit_pg
