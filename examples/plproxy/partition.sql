-- The app's side of "the limit commits with the work" over PL/Proxy, run in
-- every partition database (after CREATE EXTENSION ratelimit). The router's
-- send_message (router.sql) routes each call by the same hash as the
-- limit's own calls, so it runs on the partition that holds both the
-- user's sendMessage limit and the user's messages: the token and the row
-- commit, or roll back, in one transaction there.

CREATE TABLE public.messages (
    id      bigserial PRIMARY KEY,
    user_id text NOT NULL,
    body    text NOT NULL CHECK (body <> ''),
    sent_at timestamptz NOT NULL DEFAULT now()
);

-- Stores one message if the user's sendMessage limit grants it. A refusal
-- raises PT429 before anything is stored; a failed insert (an empty body)
-- rolls the consumed token back with it.
CREATE FUNCTION public.send_message(i_user_id text, i_body text)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = public, pg_catalog
AS $$
DECLARE
    new_id bigint;
BEGIN
    PERFORM ratelimit_limit('sendMessage', i_user_id, throws => true);
    INSERT INTO messages (user_id, body) VALUES (i_user_id, i_body) RETURNING id INTO new_id;
    RETURN new_id;
END;
$$;

-- The user's messages, oldest first.
CREATE FUNCTION public.user_messages(i_user_id text)
RETURNS SETOF text
LANGUAGE sql STABLE
SET search_path = public, pg_catalog
AS $$
    SELECT body FROM messages WHERE user_id = i_user_id ORDER BY id;
$$;
