package mysql

import (
	"strconv"
	"strings"

	"github.com/claimlock/claimlock/dialect"
)

// Version is a parsed server version, as reported by SELECT VERSION() and
// @@version_comment.
type Version struct {
	// Engine is MySQL, MariaDB or TiDB.
	Engine dialect.Engine
	// Major, Minor and Patch are the engine's own version numbers (for TiDB,
	// the MySQL version it emulates, since that is what VERSION() leads with).
	Major, Minor, Patch int
	// Raw is VERSION() as reported.
	Raw string
}

// ParseVersion parses the result of SELECT VERSION() and, optionally,
// @@version_comment. A version containing "TiDB" is TiDB; one containing
// "MariaDB" (in either string) is MariaDB; anything else is MySQL. The
// "5.5.5-" prefix that old MariaDB replication handshakes add is skipped.
// Unparsable numbers are left at zero, which disables version-gated features.
func ParseVersion(version, comment string) Version {
	v := Version{Raw: version, Engine: dialect.EngineMySQL}
	lv, lc := strings.ToLower(version), strings.ToLower(comment)
	switch {
	case strings.Contains(lv, "tidb") || strings.Contains(lc, "tidb"):
		v.Engine = dialect.EngineTiDB
	case strings.Contains(lv, "mariadb") || strings.Contains(lc, "mariadb"):
		v.Engine = dialect.EngineMariaDB
	}
	s := version
	if v.Engine == dialect.EngineMariaDB {
		s = strings.TrimPrefix(s, "5.5.5-")
	}
	nums := [3]int{}
	for i := range nums {
		j := 0
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == 0 {
			break
		}
		nums[i], _ = strconv.Atoi(s[:j])
		s = s[j:]
		if len(s) == 0 || s[0] != '.' {
			break
		}
		s = s[1:]
	}
	v.Major, v.Minor, v.Patch = nums[0], nums[1], nums[2]
	return v
}

// AtLeast reports whether v is major.minor.patch or later.
func (v Version) AtLeast(major, minor, patch int) bool {
	if v.Major != major {
		return v.Major > major
	}
	if v.Minor != minor {
		return v.Minor > minor
	}
	return v.Patch >= patch
}

// SkipLocked reports whether FOR UPDATE SKIP LOCKED really skips locked rows:
// MySQL 8.0.1 and later, MariaDB 10.6 and later, never TiDB (which parses the
// clause and ignores it).
func (v Version) SkipLocked() bool {
	switch v.Engine {
	case dialect.EngineMySQL:
		return v.AtLeast(8, 0, 1)
	case dialect.EngineMariaDB:
		return v.AtLeast(10, 6, 0)
	}
	return false
}

// IsolationVariable is the name of the session variable holding the
// transaction isolation level: transaction_isolation on MySQL 5.7.20+, TiDB
// and MariaDB 11.1+, tx_isolation on older servers.
func (v Version) IsolationVariable() string {
	switch v.Engine {
	case dialect.EngineMariaDB:
		if v.AtLeast(11, 1, 0) {
			return "transaction_isolation"
		}
		return "tx_isolation"
	case dialect.EngineMySQL:
		if v.Major != 0 && !v.AtLeast(5, 7, 20) {
			return "tx_isolation"
		}
	}
	return "transaction_isolation"
}

// otherIsolationVariable is the alternative name, tried when the server
// rejects the one the version suggests.
func otherIsolationVariable(name string) string {
	if name == "tx_isolation" {
		return "transaction_isolation"
	}
	return "tx_isolation"
}
