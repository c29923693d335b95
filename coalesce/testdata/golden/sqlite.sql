-- coalesce statements for sqlite, default table names

-- tables
CREATE TABLE IF NOT EXISTS "coalesce_changes" (id INTEGER PRIMARY KEY AUTOINCREMENT, change_key TEXT NOT NULL, event_id TEXT NOT NULL, source TEXT NOT NULL DEFAULT '', seq INTEGER NOT NULL DEFAULT 0, payload BLOB, accepted_at INTEGER NOT NULL, folded_at INTEGER);
CREATE TABLE IF NOT EXISTS "coalesce_keys" (change_key TEXT NOT NULL PRIMARY KEY, status VARCHAR(32) NOT NULL DEFAULT 'PENDING', token TEXT, claimed_at INTEGER, attempts INTEGER NOT NULL DEFAULT 0, run_at INTEGER, last_error TEXT, version INTEGER NOT NULL DEFAULT 0, flush_version INTEGER NOT NULL DEFAULT 0, persisted INTEGER NOT NULL DEFAULT 0, folded INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS "coalesce_sources" (change_key TEXT NOT NULL, source TEXT NOT NULL, last_seq INTEGER NOT NULL, PRIMARY KEY (change_key, source));
CREATE UNIQUE INDEX IF NOT EXISTS "coalesce_changes_event" ON "coalesce_changes" (event_id);
CREATE INDEX IF NOT EXISTS "coalesce_changes_key" ON "coalesce_changes" (change_key, folded_at, id);
CREATE INDEX IF NOT EXISTS "coalesce_changes_unfolded" ON "coalesce_changes" (folded_at, accepted_at);

-- findEvent
SELECT id, change_key, source, seq FROM "coalesce_changes" WHERE event_id = ?;

-- bumpSource
UPDATE "coalesce_sources" SET last_seq = ? WHERE change_key = ? AND source = ? AND last_seq < ?;

-- insertSource
INSERT INTO "coalesce_sources" (change_key, source, last_seq) VALUES (?, ?, ?) ON CONFLICT DO NOTHING;

-- readSource
SELECT last_seq FROM "coalesce_sources" WHERE change_key = ? AND source = ?;

-- insertChange
INSERT INTO "coalesce_changes" (change_key, event_id, source, seq, payload, accepted_at) VALUES (?, ?, ?, ?, ?, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)) ON CONFLICT DO NOTHING;

-- readKey
SELECT status, version, flush_version FROM "coalesce_keys" WHERE change_key = ?;

-- insertKey
INSERT INTO "coalesce_keys" (change_key, status, version) VALUES (?, 'PENDING', 1) ON CONFLICT DO NOTHING;

-- bumpDone
UPDATE "coalesce_keys" SET status = 'PENDING', version = version + 1 WHERE change_key = ? AND CASE WHEN status = 'DONE' THEN version END = ?;

-- bumpProcessing
UPDATE "coalesce_keys" SET version = version + 1 WHERE change_key = ? AND CASE WHEN status = 'PROCESSING' THEN version END = ?;

-- bumpInTx
UPDATE "coalesce_keys" SET version = version + 1, status = CASE WHEN status = 'DONE' THEN 'PENDING' ELSE status END WHERE change_key = ?;

-- startFlush
UPDATE "coalesce_keys" SET flush_version = version WHERE token = ?;

-- readChanges
SELECT id, event_id, source, seq, payload FROM "coalesce_changes" WHERE change_key = ? AND folded_at IS NULL ORDER BY id LIMIT ?;

-- bumpHeld
UPDATE "coalesce_keys" SET version = version + 1 WHERE change_key = ?;

-- markFolded
-- (with as many placeholders as changes)
UPDATE "coalesce_changes" SET folded_at = CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) WHERE +folded_at IS NULL AND id IN (?, ?, ?);

-- persist
UPDATE "coalesce_keys" SET persisted = MAX(persisted, ?), folded = folded + ? WHERE change_key = ?;

-- versions
SELECT COALESCE((SELECT MAX(last_seq) FROM "coalesce_sources" WHERE change_key = ?), 0), COALESCE((SELECT persisted FROM "coalesce_keys" WHERE change_key = ?), 0);

-- backlog
SELECT COUNT(*) FROM "coalesce_keys" WHERE status IN ('PENDING', 'PROCESSING');

-- oldest
SELECT COALESCE((SELECT CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) - c.accepted_at FROM "coalesce_changes" c WHERE c.folded_at IS NULL AND NOT EXISTS (SELECT 1 FROM "coalesce_keys" k WHERE k.change_key = c.change_key AND k.status = 'FAILED') ORDER BY c.accepted_at LIMIT 1), 0);

-- stranded
SELECT c.change_key FROM "coalesce_changes" c WHERE c.folded_at IS NULL AND c.accepted_at < (SELECT CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)) - ? AND COALESCE((SELECT k.status FROM "coalesce_keys" k WHERE k.change_key = c.change_key), 'DONE') = 'DONE' ORDER BY c.accepted_at LIMIT ?;

-- prune
DELETE FROM "coalesce_changes" WHERE id IN (SELECT id FROM "coalesce_changes" WHERE folded_at < (SELECT CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)) - ? ORDER BY folded_at, accepted_at, id LIMIT 1000);

-- batch findEvents
-- (with a group per change, source or key: 3 here)
SELECT id, event_id, change_key, source, seq FROM "coalesce_changes" WHERE event_id IN (?, ?, ?);

-- batch findEventsLocked
-- (with a group per change, source or key: 3 here)
SELECT id, event_id, change_key, source, seq FROM "coalesce_changes" WHERE event_id IN (?, ?, ?);

-- batch insertChanges
-- (with a group per change, source or key: 3 here)
INSERT INTO "coalesce_changes" (change_key, event_id, source, seq, payload, accepted_at) VALUES (?, ?, ?, ?, ?, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)), (?, ?, ?, ?, ?, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)), (?, ?, ?, ?, ?, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)) ON CONFLICT DO NOTHING RETURNING id, event_id;

-- batch readSources
-- (with a group per change, source or key: 3 here)
SELECT change_key, source, last_seq FROM "coalesce_sources" WHERE (change_key = ? AND source = ?) OR (change_key = ? AND source = ?) OR (change_key = ? AND source = ?);

-- batch insertSources
-- (with a group per change, source or key: 3 here)
INSERT INTO "coalesce_sources" (change_key, source, last_seq) VALUES (?, ?, ?), (?, ?, ?), (?, ?, ?) ON CONFLICT DO NOTHING;

-- batch setSources
-- (with a group per change, source or key: 3 here)
INSERT INTO "coalesce_sources" (change_key, source, last_seq) VALUES (?, ?, ?), (?, ?, ?), (?, ?, ?) ON CONFLICT (change_key, source) DO UPDATE SET last_seq = excluded.last_seq;

-- batch readKeys
-- (with a group per change, source or key: 3 here)
SELECT change_key, status, version, flush_version FROM "coalesce_keys" WHERE change_key IN (?, ?, ?);

-- batch insertKeys
-- (with a group per change, source or key: 3 here)
INSERT INTO "coalesce_keys" (change_key, status, version) VALUES (?, 'PENDING', 1), (?, 'PENDING', 1), (?, 'PENDING', 1) ON CONFLICT DO NOTHING;

-- batch bumpDoneKeys
-- (with a group per change, source or key: 3 here)
UPDATE "coalesce_keys" SET status = 'PENDING', version = version + 1 WHERE (change_key = ? AND CASE WHEN status = 'DONE' THEN version END = ?) OR (change_key = ? AND CASE WHEN status = 'DONE' THEN version END = ?) OR (change_key = ? AND CASE WHEN status = 'DONE' THEN version END = ?);

-- batch bumpProcessingKeys
-- (with a group per change, source or key: 3 here)
UPDATE "coalesce_keys" SET version = version + 1 WHERE (change_key = ? AND CASE WHEN status = 'PROCESSING' THEN version END = ?) OR (change_key = ? AND CASE WHEN status = 'PROCESSING' THEN version END = ?) OR (change_key = ? AND CASE WHEN status = 'PROCESSING' THEN version END = ?);
