-- objects: bgexec._jsonb_object(keys, vals) builds {keys[i]: vals[i]} by
-- copying each value's stored bytes (the terminal event's {"result": ...},
-- _completed_steps, _completed_stdout).  Whatever it builds must be the
-- jsonb that jsonb_object_agg builds from the same pairs: equal, equal
-- once printed and parsed again, and readable key by key (a wrong JEntry
-- offset or padding shows in ->, which binary-searches the keys).
\set SHOW_CONTEXT never
CREATE TEMP TABLE val (o int PRIMARY KEY, v jsonb);
INSERT INTO val VALUES
  (0, 'null'), (1, 'true'), (2, 'false'), (3, '0'), (4, '-12.5e300'),
  (5, '""'), (6, '"ünïcødé ✓"'), (7, '[]'), (8, '{}'),
  (9, '[1, "a", null, {"b": [2.5, true]}]'), (10, '{"k": {"k": {"k": 1}}}'),
  (11, (SELECT jsonb_agg(i * 1.5) FROM generate_series(1, 100) i)),
  (12, to_jsonb(repeat('x', 100000))),
  (13, (SELECT jsonb_object_agg('key' || i, i) FROM generate_series(1, 50) i)),
  (14, '3.14159265358979323846264338327950288419716939937510'),
  (15, '"a"'), (16, NULL);
-- Pairs: n keys of lengths 1..4 and shapes that sort apart from their
-- order, each taking the values in turn, so every value follows keys and
-- values of every length (the padding before containers and numbers).
CREATE TEMP TABLE pairs AS
SELECT n, i, CASE i % 4 WHEN 0 THEN chr(97 + i % 26) WHEN 1 THEN 'k' || i
                        WHEN 2 THEN repeat('z', i % 7) ELSE 'é' || (i * 7919 % 100) END AS k,
       (SELECT v FROM val WHERE o = i % 17) AS v
  FROM generate_series(0, 70) n, generate_series(1, n) i;
-- Built both ways for 0..70 pairs (past the 32 entries where an offset
-- stands in for a length, and past 64); equal keys keep the last value.
CREATE TEMP TABLE built AS
SELECT n,
       (SELECT bgexec._jsonb_object(coalesce(array_agg(k ORDER BY i), '{}'),
                                    coalesce(array_agg(v ORDER BY i), '{}'))
          FROM pairs p WHERE p.n = g.n) AS ours,
       (SELECT coalesce(jsonb_object_agg(k, coalesce(v, 'null') ORDER BY i), '{}')
          FROM pairs p WHERE p.n = g.n) AS agg
  FROM generate_series(0, 70) g(n);
SELECT count(*) AS cases,
       count(*) FILTER (WHERE ours = agg) AS equal,
       count(*) FILTER (WHERE ours::text = agg::text) AS same_text,
       count(*) FILTER (WHERE ours::text::jsonb = ours) AS parse_back,
       count(*) FILTER (WHERE jsonb_typeof(ours) = 'object') AS objects
  FROM built;
-- every key reads back its value (the last of equal keys)
SELECT count(*) AS lookups,
       count(*) FILTER (WHERE b.ours -> p.k = coalesce(p.v, 'null')) AS found
  FROM built b JOIN pairs p ON p.n = b.n
 WHERE NOT EXISTS (SELECT FROM pairs q WHERE q.n = p.n AND q.k = p.k AND q.i > p.i);
-- nested in an object of its own, and its paths still read
SELECT count(*) FILTER (WHERE bgexec._jsonb_object('{result}', ARRAY[ours]) -> 'result' = agg) AS nested,
       count(*) FILTER (WHERE bgexec._jsonb_object('{result}', ARRAY[ours]) #> '{result,k13,key7}'
                              IS NOT DISTINCT FROM agg #> '{k13,key7}') AS paths
  FROM built;
-- small cases exactly
SELECT bgexec._jsonb_object('{}', '{}');
SELECT bgexec._jsonb_object('{result}', ARRAY['{"a": [1, 2]}'::jsonb]);
SELECT bgexec._jsonb_object('{error}', ARRAY[NULL::jsonb]);
SELECT bgexec._jsonb_object('{bb,a,ccc,a}', '{1,"\"x\"",null,2.50}'::jsonb[]);
SELECT bgexec._jsonb_object(NULL, '{}') IS NULL AS strict;
-- bad input: a clear error, nothing built
SELECT bgexec._jsonb_object(ARRAY['a', NULL], '{1,2}'::jsonb[]);
SELECT bgexec._jsonb_object('{a,b}', '{1}'::jsonb[]);
SELECT bgexec._jsonb_object('{{a},{b}}', '{{1},{2}}'::jsonb[]);
