# PGXS build of the ratelimit extension: the shared library, install, and
# `make installcheck` (pg_regress + isolation specs against a running server).
# The C++ unit and client tests are built by CMakeLists.txt.

# ratelimit_proxy: the router side over PL/Proxy's cluster definition; its
# C functions are in the ratelimit library (src/pg/route, which links libpq).
EXTENSION = ratelimit ratelimit_proxy
MODULE_big = ratelimit
# Every source file of the core and the adapter (src/pg's folders by layer:
# docs/internals.md, "Code layout").
OBJS = $(patsubst %.cpp,%.o,$(sort $(shell find src/core src/pg -name '*.cpp')))
DATA = $(wildcard sql/ratelimit--*.sql) $(wildcard sql/ratelimit_proxy--*.sql)

REGRESS = $(patsubst sql/%.sql,%,$(filter-out sql/ratelimit--% sql/ratelimit_proxy--%,$(sort $(wildcard sql/*.sql))))
REGRESS_OPTS = --inputdir=. --load-extension=ratelimit
ISOLATION = $(patsubst test/isolation/specs/%.spec,%,$(sort $(wildcard test/isolation/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test/isolation --load-extension=ratelimit

# The adapter's includes name their folder: "storage/table/row_write.h".
PG_CPPFLAGS = -Isrc/core -Isrc/pg -I$(shell $(PG_CONFIG) --includedir)
PG_CXXFLAGS = -std=c++20 -fPIC -Wall -Wextra -Werror -Wno-unused-parameter
SHLIB_LINK = -lstdc++
SHLIB_LINK_INTERNAL = -L$(shell $(PG_CONFIG) --libdir) -lpq

# The adapter (src/pg) is built without C++ exceptions: none of its code
# may throw or catch (a C++ exception crossing PostgreSQL's C frames would
# crash the backend), and the compiler enforces it. The core raises none:
# it has no throw, try or catch, allocates nothing and calls nothing that
# throws; its functions are noexcept and return errors as a Status (one
# that threw would end the process, never unwind into PostgreSQL).
$(filter src/pg/%,$(OBJS)): override CXXFLAGS += -fno-exceptions

# No LLVM bitcode: JIT inlining of this module buys nothing, and it would
# need a clang matching the server's LLVM.
override with_llvm = no

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PostgreSQL's headers are not -Wextra clean in C++; treat them as system headers.
override CPPFLAGS := $(patsubst -I$(includedir_server),-isystem $(includedir_server),$(CPPFLAGS))

# PGXS does not track header dependencies: rebuild every object when a header changes.
$(OBJS): $(shell find src/core src/pg -name '*.h')

# The module is linked with unresolved symbols allowed (the server provides
# them at load time), so a function of the extension's own that is declared
# but defined nowhere (or only in an anonymous namespace) would only fail
# at CREATE EXTENSION: fail the build instead.
all: check-own-symbols
check-own-symbols: $(shlib)
	@if nm -D --undefined-only $(shlib) | grep -E '_ZN(9ratelimit|12ratelimit_pg)'; then \
	  echo "$(shlib): the symbols above are the extension's own and defined nowhere" >&2; exit 1; fi
.PHONY: check-own-symbols
