SELECT lean_pl_token_bucket('n', 'k1', 1000000, 1000, 1000000);
