# 100k rows inserted and aggregated.
sqlite3 :memory: <<'SQL'
CREATE TABLE t(id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, v REAL);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000)
INSERT INTO t SELECT x, x % 97, printf('name-%d-%s', x, hex(x * 7919)), (x * 37 % 1000) / 7.0 FROM c;
CREATE INDEX t_grp ON t(grp, name);
SELECT grp, count(*), sum(v), min(name), max(name) FROM t GROUP BY grp ORDER BY grp;
SELECT count(DISTINCT name), sum(length(name)) FROM t;
SELECT group_concat(id) FROM (SELECT id FROM t WHERE name LIKE '%-1%7%' ORDER BY v DESC, id LIMIT 50);
SQL
