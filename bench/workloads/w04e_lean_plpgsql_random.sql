\set k random(1, 100000)
SELECT lean_pl_token_bucket('n', 'k' || :k, 1000000, 1000, 1000000);
