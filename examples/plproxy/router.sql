-- The router's side of the pattern of partition.sql, run in the router
-- database (after CREATE EXTENSION plproxy; CREATE EXTENSION
-- ratelimit_proxy;). Each function runs on the partition of
-- ratelimit_hash('sendMessage', user): the partition that holds that user's
-- limit, so the app's function there consumes it in its own transaction.

CREATE FUNCTION public.send_message(i_user_id text, i_body text)
RETURNS bigint
LANGUAGE plproxy
AS $$
    CLUSTER 'ratelimit';
    RUN ON public.ratelimit_hash('sendMessage', i_user_id);
$$;

CREATE FUNCTION public.user_messages(i_user_id text)
RETURNS SETOF text
LANGUAGE plproxy
AS $$
    CLUSTER 'ratelimit';
    RUN ON public.ratelimit_hash('sendMessage', i_user_id);
$$;
