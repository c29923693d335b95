package mysql

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
)

func TestParseVersion(t *testing.T) {
	t.Parallel()
	cases := []struct {
		version, comment string
		engine           dialect.Engine
		major, minor     int
		patch            int
		skipLocked       bool
		isolationVar     string
	}{
		{"5.7.44-log", "MySQL Community Server (GPL)", dialect.EngineMySQL, 5, 7, 44, false, "transaction_isolation"},
		{"5.7.19", "", dialect.EngineMySQL, 5, 7, 19, false, "tx_isolation"},
		{"8.0.0-dmr", "", dialect.EngineMySQL, 8, 0, 0, false, "transaction_isolation"},
		{"8.0.1-dmr-log", "", dialect.EngineMySQL, 8, 0, 1, true, "transaction_isolation"},
		{"8.0.36", "MySQL Community Server - GPL", dialect.EngineMySQL, 8, 0, 36, true, "transaction_isolation"},
		{"8.4.0", "MySQL Community Server - GPL", dialect.EngineMySQL, 8, 4, 0, true, "transaction_isolation"},
		{"10.5.23-MariaDB-log", "MariaDB Server", dialect.EngineMariaDB, 10, 5, 23, false, "tx_isolation"},
		{"10.6.0-MariaDB", "", dialect.EngineMariaDB, 10, 6, 0, true, "tx_isolation"},
		{"10.11.19-MariaDB-0+deb12u1", "Debian 12", dialect.EngineMariaDB, 10, 11, 19, true, "tx_isolation"},
		{"5.5.5-10.6.12-MariaDB-log", "", dialect.EngineMariaDB, 10, 6, 12, true, "tx_isolation"},
		{"11.0.6-MariaDB", "", dialect.EngineMariaDB, 11, 0, 6, true, "tx_isolation"},
		{"11.4.2-MariaDB-ubu2404", "mariadb.org binary distribution", dialect.EngineMariaDB, 11, 4, 2, true, "transaction_isolation"},
		{"10.11.6", "MariaDB Server", dialect.EngineMariaDB, 10, 11, 6, true, "tx_isolation"},
		{"5.7.25-TiDB-v6.5.0", "", dialect.EngineTiDB, 5, 7, 25, false, "transaction_isolation"},
		{"8.0.11-TiDB-v7.5.1", "", dialect.EngineTiDB, 8, 0, 11, false, "transaction_isolation"},
		{"8.0.11", "TiDB Server (Apache License 2.0) Community Edition", dialect.EngineTiDB, 8, 0, 11, false, "transaction_isolation"},
		{"garbage", "", dialect.EngineMySQL, 0, 0, 0, false, "transaction_isolation"},
		{"", "", dialect.EngineMySQL, 0, 0, 0, false, "transaction_isolation"},
	}
	for _, c := range cases {
		v := ParseVersion(c.version, c.comment)
		require.Equal(t, c.engine, v.Engine, "%q", c.version)
		require.Equal(t, [3]int{c.major, c.minor, c.patch}, [3]int{v.Major, v.Minor, v.Patch}, "%q", c.version)
		require.Equal(t, c.skipLocked, v.SkipLocked(), "%q", c.version)
		require.Equal(t, c.isolationVar, v.IsolationVariable(), "%q", c.version)
		require.Equal(t, c.version, v.Raw)
	}
}

func TestVersionAtLeast(t *testing.T) {
	t.Parallel()
	v := Version{Major: 8, Minor: 0, Patch: 1}
	require.True(t, v.AtLeast(8, 0, 1))
	require.True(t, v.AtLeast(5, 7, 99))
	require.False(t, v.AtLeast(8, 0, 2))
	require.False(t, v.AtLeast(8, 1, 0))
	require.False(t, v.AtLeast(9, 0, 0))
	require.Equal(t, "transaction_isolation", otherIsolationVariable("tx_isolation"))
	require.Equal(t, "tx_isolation", otherIsolationVariable("transaction_isolation"))
}
