// Makes it a compile error for the pure core to see a PostgreSQL header.
// The adapter includes core headers first and PostgreSQL headers after them,
// so this only fires when core code itself pulls PostgreSQL in.
#pragma once

#if defined(POSTGRES_H) || defined(C_H) || defined(PG_CONFIG_H)
#error "src/core must not include PostgreSQL headers"
#endif
