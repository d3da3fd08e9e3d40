// A limit's configuration (config.cpp): validation of configs
// and requests (a sharded limit is tested on two full shards, as a call
// decides), the largest count a call can be granted, and where the windows
// of one (name, key) are aligned. Every function is noexcept.
#pragma once

#include "types.h"

namespace ratelimit {

// An invalid-parameter status (22023 in the adapter) with a printf-style
// message and a detail (NULL: none).
__attribute__((format(printf, 2, 3))) Status Invalid(const char* detail, const char* format, ...) noexcept;

// Checks a parsed config: required fields, ranges, fields that do not apply
// to the kind, and that refilling from empty to full fits in the horizon.
// ValidateConfigFields, then ValidateConfigCombination; between the two,
// the adapter checks what it adds to a config beside these fields, which
// the core does not know.
Status ValidateConfig(const LimitConfig& config) noexcept;
// Each field alone: required fields and ranges.
Status ValidateConfigFields(const LimitConfig& config) noexcept;
// The fields together: fields that do not apply to the kind, and that
// refilling from empty to full fits in the horizon.
Status ValidateConfigCombination(const LimitConfig& config) noexcept;

// Checks an amount of tokens: finite and >= 0.
Status ValidateAmount(double count) noexcept;

// Checks a request against a valid config: count finite and >= 0, reserve
// allowed for the kind, and count able to succeed at all.
Status ValidateRequest(const LimitConfig& config, const Request& request) noexcept;
// ValidateRequest's checks but the last: what a request must be in every
// mode (a shadow limit answers a count that can never succeed instead).
Status ValidateRequestForm(const LimitConfig& config, const Request& request) noexcept;

// The largest count one call can ever be granted (capacity, plus
// maxReserved when reserving); for a sharded limit, what two shards hold.
double MostGrantable(const LimitConfig& config, bool reserve) noexcept;

// The origin the windows of one (name, key) are aligned to, in [0, period):
// config start when given, else the stable hash of (name, key) mod period.
// key == nullptr means the NULL (global) key.
Micros WindowOrigin(const LimitConfig& config, const char* name, std::size_t name_len, const char* key,
                    std::size_t key_len) noexcept;

// FNV-1a 64 over name, then (only for a non-NULL key) a zero byte and the key.
std::uint64_t LimitHash(const char* name, std::size_t name_len, const char* key,
                        std::size_t key_len) noexcept;

}  // namespace ratelimit
