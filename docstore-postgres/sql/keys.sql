-- The order-preserving key encoding of `docstore::index::key`, computed by the server, so
-- that an expression index over a declared index's key orders documents as bytes in the
-- contract's total order (docs/contract.md, "Queries": missing < null < false < true <
-- numbers < strings < arrays < objects). `{s}` is the quoted schema. Created once per
-- schema; `crate::keys` checks the server's keys against the Rust encoding in its tests.

-- A number: tag 04, the largest float not above its exact value as order-preserving bits,
-- then the integer remainder (2 bytes; only integers of 2^53 and beyond in i64/u64 have
-- one). `numeric::float8` rounds to nearest (numeric_out, then strtod) as serde_json does.
CREATE FUNCTION {s}.docstore_number(n numeric) RETURNS bytea
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
CREATE FUNCTION {s}.docstore_exact(u numeric) RETURNS numeric
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

-- A value's key component; `NULL` (no key here: the document is read beside the index)
-- for an object anywhere in it, whose canonical text this encoding would need.
CREATE FUNCTION {s}.docstore_key(v jsonb) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $body$
DECLARE
    out bytea;
    part bytea;
    item jsonb;
BEGIN
    IF v IS NULL THEN
        RETURN '\x00'::bytea;
    END IF;
    CASE jsonb_typeof(v)
    WHEN 'null' THEN RETURN '\x01'::bytea;
    WHEN 'boolean' THEN RETURN CASE WHEN v = 'true'::jsonb THEN '\x03'::bytea ELSE '\x02'::bytea END;
    WHEN 'number' THEN RETURN {s}.docstore_number(v::numeric);
    -- A JSONB string never holds U+0000 (such documents are kept in `raw`), so no escape.
    WHEN 'string' THEN RETURN '\x05'::bytea || convert_to(v #>> '{}', 'UTF8') || '\x0000'::bytea;
    WHEN 'array' THEN
        out := '\x06'::bytea;
        FOR item IN SELECT e FROM jsonb_array_elements(v) WITH ORDINALITY AS t(e, i) ORDER BY i LOOP
            part := {s}.docstore_key(item);
            IF part IS NULL THEN
                RETURN NULL;
            END IF;
            out := out || part;
        END LOOP;
        RETURN out || '\x00'::bytea;
    ELSE RETURN NULL;
    END CASE;
END
$body$;

-- A descending component: every byte inverted.
CREATE FUNCTION {s}.docstore_invert(b bytea) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $body$
BEGIN
    FOR i IN 0 .. length(b) - 1 LOOP
        b := set_byte(b, i, 255 - get_byte(b, i));
    END LOOP;
    RETURN b;
END
$body$;
