\set k random(1, 100000)
SELECT ratelimit_limit('n', 'k' || :k);
