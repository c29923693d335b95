-- coalesce statements for mysql, default table names

-- tables
CREATE TABLE IF NOT EXISTS `coalesce_changes` (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, change_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, event_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, source VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '', seq BIGINT NOT NULL DEFAULT 0, payload LONGBLOB, accepted_at BIGINT NOT NULL, folded_at BIGINT, UNIQUE KEY `coalesce_changes_event` (event_id), KEY `coalesce_changes_key` (change_key, folded_at, id), KEY `coalesce_changes_unfolded` (folded_at, accepted_at)) ENGINE=InnoDB;
CREATE TABLE IF NOT EXISTS `coalesce_keys` (change_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY, status VARCHAR(32) NOT NULL DEFAULT 'PENDING', token VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, claimed_at DATETIME(6), attempts BIGINT NOT NULL DEFAULT 0, run_at DATETIME(6), last_error VARCHAR(1024), version BIGINT NOT NULL DEFAULT 0, flush_version BIGINT NOT NULL DEFAULT 0, persisted BIGINT NOT NULL DEFAULT 0, folded BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB;
CREATE TABLE IF NOT EXISTS `coalesce_sources` (change_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, source VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, last_seq BIGINT NOT NULL, PRIMARY KEY (change_key, source)) ENGINE=InnoDB;

-- findEvent
SELECT id, change_key, source, seq FROM `coalesce_changes` WHERE event_id = ?;

-- bumpSource
UPDATE `coalesce_sources` SET last_seq = ? WHERE change_key = ? AND source = ? AND last_seq < ?;

-- insertSource
INSERT IGNORE INTO `coalesce_sources` (change_key, source, last_seq) VALUES (?, ?, ?);

-- readSource
SELECT last_seq FROM `coalesce_sources` WHERE change_key = ? AND source = ?;

-- insertChange
INSERT IGNORE INTO `coalesce_changes` (change_key, event_id, source, seq, payload, accepted_at) VALUES (?, ?, ?, ?, ?, CAST(UNIX_TIMESTAMP(NOW(6)) * 1000 AS SIGNED));

-- readKey
SELECT status, version, flush_version FROM `coalesce_keys` WHERE change_key = ?;

-- insertKey
INSERT IGNORE INTO `coalesce_keys` (change_key, status, version) VALUES (?, 'PENDING', 1);

-- bumpDone
UPDATE `coalesce_keys` SET status = 'PENDING', version = version + 1 WHERE change_key = ? AND CASE WHEN status = 'DONE' THEN version END = ?;

-- bumpProcessing
UPDATE `coalesce_keys` SET version = version + 1 WHERE change_key = ? AND CASE WHEN status = 'PROCESSING' THEN version END = ?;

-- bumpInTx
UPDATE `coalesce_keys` SET version = version + 1, status = CASE WHEN status = 'DONE' THEN 'PENDING' ELSE status END WHERE change_key = ?;

-- startFlush
UPDATE `coalesce_keys` SET flush_version = version WHERE token = ?;

-- readChanges
SELECT id, event_id, source, seq, payload FROM `coalesce_changes` WHERE change_key = ? AND folded_at IS NULL ORDER BY id LIMIT ?;

-- bumpHeld
UPDATE `coalesce_keys` SET version = version + 1 WHERE change_key = ?;

-- markFolded
-- (with as many placeholders as changes)
UPDATE `coalesce_changes` SET folded_at = CAST(UNIX_TIMESTAMP(NOW(6)) * 1000 AS SIGNED) WHERE folded_at IS NULL AND id IN (?, ?, ?);

-- persist
UPDATE `coalesce_keys` SET persisted = GREATEST(persisted, ?), folded = folded + ? WHERE change_key = ?;

-- versions
SELECT COALESCE((SELECT MAX(last_seq) FROM `coalesce_sources` WHERE change_key = ?), 0), COALESCE((SELECT persisted FROM `coalesce_keys` WHERE change_key = ?), 0);

-- backlog
SELECT COUNT(*) FROM `coalesce_keys` WHERE status IN ('PENDING', 'PROCESSING');

-- oldest
SELECT COALESCE((SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000 AS SIGNED) - c.accepted_at FROM `coalesce_changes` c WHERE c.folded_at IS NULL AND NOT EXISTS (SELECT 1 FROM `coalesce_keys` k WHERE k.change_key = c.change_key AND k.status = 'FAILED') ORDER BY c.accepted_at LIMIT 1), 0);

-- stranded
SELECT c.change_key FROM `coalesce_changes` c WHERE c.folded_at IS NULL AND c.accepted_at < (SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000 AS SIGNED)) - ? AND COALESCE((SELECT k.status FROM `coalesce_keys` k WHERE k.change_key = c.change_key), 'DONE') = 'DONE' ORDER BY c.accepted_at LIMIT ?;

-- prune
DELETE FROM `coalesce_changes` WHERE folded_at < (SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000 AS SIGNED)) - ? ORDER BY folded_at, accepted_at, id LIMIT 1000;

-- batch findEvents
-- (with a group per change, source or key: 3 here)
SELECT id, event_id, change_key, source, seq FROM `coalesce_changes` WHERE event_id IN (?, ?, ?);

-- batch findEventsLocked
-- (with a group per change, source or key: 3 here)
SELECT id, event_id, change_key, source, seq FROM `coalesce_changes` WHERE event_id IN (?, ?, ?) LOCK IN SHARE MODE;

-- batch insertChanges
-- (with a group per change, source or key: 3 here)
INSERT IGNORE INTO `coalesce_changes` (change_key, event_id, source, seq, payload, accepted_at) VALUES (?, ?, ?, ?, ?, CAST(UNIX_TIMESTAMP(NOW(6)) * 1000 AS SIGNED)), (?, ?, ?, ?, ?, CAST(UNIX_TIMESTAMP(NOW(6)) * 1000 AS SIGNED)), (?, ?, ?, ?, ?, CAST(UNIX_TIMESTAMP(NOW(6)) * 1000 AS SIGNED));

-- batch readSources
-- (with a group per change, source or key: 3 here)
SELECT change_key, source, last_seq FROM `coalesce_sources` WHERE (change_key = ? AND source = ?) OR (change_key = ? AND source = ?) OR (change_key = ? AND source = ?) FOR UPDATE;

-- batch insertSources
-- (with a group per change, source or key: 3 here)
INSERT IGNORE INTO `coalesce_sources` (change_key, source, last_seq) VALUES (?, ?, ?), (?, ?, ?), (?, ?, ?);

-- batch setSources
-- (with a group per change, source or key: 3 here)
INSERT INTO `coalesce_sources` (change_key, source, last_seq) VALUES (?, ?, ?), (?, ?, ?), (?, ?, ?) ON DUPLICATE KEY UPDATE last_seq = VALUES(last_seq);

-- batch readKeys
-- (with a group per change, source or key: 3 here)
SELECT change_key, status, version, flush_version FROM `coalesce_keys` WHERE change_key IN (?, ?, ?);

-- batch insertKeys
-- (with a group per change, source or key: 3 here)
INSERT IGNORE INTO `coalesce_keys` (change_key, status, version) VALUES (?, 'PENDING', 1), (?, 'PENDING', 1), (?, 'PENDING', 1);

-- batch bumpDoneKeys
-- (with a group per change, source or key: 3 here)
UPDATE `coalesce_keys` SET status = 'PENDING', version = version + 1 WHERE (change_key = ? AND CASE WHEN status = 'DONE' THEN version END = ?) OR (change_key = ? AND CASE WHEN status = 'DONE' THEN version END = ?) OR (change_key = ? AND CASE WHEN status = 'DONE' THEN version END = ?);

-- batch bumpProcessingKeys
-- (with a group per change, source or key: 3 here)
UPDATE `coalesce_keys` SET version = version + 1 WHERE (change_key = ? AND CASE WHEN status = 'PROCESSING' THEN version END = ?) OR (change_key = ? AND CASE WHEN status = 'PROCESSING' THEN version END = ?) OR (change_key = ? AND CASE WHEN status = 'PROCESSING' THEN version END = ?);
