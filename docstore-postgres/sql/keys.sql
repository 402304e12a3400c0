-- The order-preserving key encoding of `docstore::index::key`, computed by the server, so
-- that an expression index over a declared index's key orders documents as bytes in the
-- contract's total order (docs/contract.md, "Queries": missing < null < false < true <
-- numbers < strings < arrays < objects). `{s}` is the quoted schema; `{text_bytes}` the
-- UTF-8 bytes of text `t` (see `crate::keys`). Created (or replaced, for a schema made with
-- earlier definitions: the same keys) once per schema; `crate::keys` checks the server's
-- keys against the Rust encoding in its tests.
--
-- Why SQL functions with a single expression: PostgreSQL inlines those (when every function
-- they call is immutable), so a key costs a few expression steps rather than a call into
-- PL/pgSQL per component. A served query's `ORDER BY` evaluates its index's key for every
-- row it returns, and every write to an indexed collection evaluates it as well. PL/pgSQL is
-- left for the rare parts: integers of 2^53 and beyond, and arrays.

-- The UTF-8 bytes of `t`.
CREATE OR REPLACE FUNCTION {s}.docstore_text(t text) RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN {text_bytes};

-- A descending component: every byte inverted (each hex digit's complement).
CREATE OR REPLACE FUNCTION {s}.docstore_invert(b bytea) RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN decode(translate(encode(b, 'hex'), '0123456789abcdef', 'fedcba9876543210'), 'hex');

-- A number: tag 04, the largest float not above its exact value as order-preserving bits
-- (a float's big-endian bits with the sign bit set, or all bits inverted when negative),
-- then the integer remainder (2 bytes; only integers of 2^53 and beyond in i64/u64 have
-- one, computed by `docstore_integer`). `numeric::float8` rounds to nearest (numeric_out,
-- then strtod) as serde_json does; `+ 0` makes -0.0 0.
CREATE OR REPLACE FUNCTION {s}.docstore_float(f float8) RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN f < 0 THEN {s}.docstore_invert(float8send(f))
    ELSE set_byte(float8send(f + 0), 0, get_byte(float8send(f + 0), 0) | 128) END;

-- A number's key as `docstore_number` describes it, for any number (only integers of 2^53
-- and beyond are given to it).
CREATE OR REPLACE FUNCTION {s}.docstore_integer(n numeric) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $body$
DECLARE
    f float8 := n::float8;
    bits bigint;
    u numeric;
    rem numeric := 0;
BEGIN
    IF f = 0 THEN
        f := 0; -- -0.0 is 0
    END IF;
    bits := ('x' || encode(float8send(f), 'hex'))::bit(64)::bigint;
    u := CASE WHEN bits < 0 THEN (~bits)::numeric ELSE bits::numeric + 9223372036854775808 END;
    -- serde_json reads an integer without a point within i64/u64 as an integer, which
    -- the encoding keeps exactly.
    IF scale(n) = 0 AND abs(n) >= 9007199254740992
        AND n BETWEEN -9223372036854775808 AND 18446744073709551615 THEN
        IF {s}.docstore_exact(u) > n THEN
            u := u - 1;
        END IF;
        rem := n - {s}.docstore_exact(u);
    END IF;
    RETURN '\x04'::bytea || decode(lpad(to_hex(div(u, 4294967296)::bigint), 8, '0')
        || lpad(to_hex(mod(u, 4294967296)::bigint), 8, '0')
        || lpad(to_hex(rem::bigint), 4, '0'), 'hex');
END
$body$;

-- The exact value of the float whose order-preserving bits are `u`, for floats of
-- magnitude 2^53 and beyond (integers): mantissa × 2^(exponent − 1075).
CREATE OR REPLACE FUNCTION {s}.docstore_exact(u numeric) RETURNS numeric
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $body$
DECLARE
    negative boolean := u < 9223372036854775808;
    bits bigint;
BEGIN
    bits := CASE WHEN negative THEN ~(u::bigint) ELSE (u - 9223372036854775808)::bigint END;
    bits := bits & 9223372036854775807;
    RETURN (CASE WHEN negative THEN -1 ELSE 1 END)
        * ((bits & 4503599627370495) + 4503599627370496)::numeric
        * (1::bigint << ((bits >> 52)::int - 1075))::numeric;
END
$body$;

CREATE OR REPLACE FUNCTION {s}.docstore_number(n numeric) RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN scale(n) = 0 AND abs(n) >= 9007199254740992 THEN {s}.docstore_integer(n)
    ELSE '\x04'::bytea || {s}.docstore_float(n::float8) || '\x0000'::bytea END;

-- An array's key component: tag 06, its items' components, 00; `NULL` when one has none.
CREATE OR REPLACE FUNCTION {s}.docstore_array(v jsonb) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $body$
DECLARE
    out bytea := '\x06'::bytea;
    part bytea;
    item jsonb;
BEGIN
    FOR item IN SELECT e FROM jsonb_array_elements(v) WITH ORDINALITY AS t(e, i) ORDER BY i LOOP
        part := {s}.docstore_key(item);
        IF part IS NULL THEN
            RETURN NULL;
        END IF;
        out := out || part;
    END LOOP;
    RETURN out || '\x00'::bytea;
END
$body$;

-- A value's key component; `NULL` (no key here: the document is read beside the index)
-- for an object anywhere in it, whose canonical text this encoding would need. A JSONB
-- string never holds U+0000 (such documents are kept in `raw`), so no escape.
CREATE OR REPLACE FUNCTION {s}.docstore_key(v jsonb) RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE jsonb_typeof(v)
    WHEN 'string' THEN '\x05'::bytea || {s}.docstore_text(v #>> '{}') || '\x0000'::bytea
    WHEN 'number' THEN {s}.docstore_number(v::numeric)
    WHEN 'null' THEN '\x01'::bytea
    WHEN 'boolean' THEN CASE WHEN v = 'true'::jsonb THEN '\x03'::bytea ELSE '\x02'::bytea END
    WHEN 'array' THEN {s}.docstore_array(v)
    WHEN 'object' THEN NULL::bytea
    ELSE '\x00'::bytea END;
