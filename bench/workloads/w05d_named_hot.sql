SELECT ratelimit_limit('n', 'k1');
