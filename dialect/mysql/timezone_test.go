package mysql_test

import (
	"testing"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// TestTimestampOutsideUTC: a TIMESTAMP claimed-at or lock column converts
// what claimlock writes (UTC) through the session's time zone, so in a
// session at +08:00 every stored time would be eight hours off and a UTC
// session would find every claim eight hours old. Verification refuses it,
// naming the zone and the fix; DATETIME(6) is accepted in any zone.
func TestTimestampOutsideUTC(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	db, _ := openWith(t, func(c *gomysql.Config) { c.Params["time_zone"] = "'+08:00'" })
	d := newDialect(t, db, dialect.Options{})
	for i, c := range []struct{ typ, want string }{
		{"TIMESTAMP(6) NULL", "session time zone, here +08:00"},
		{"DATETIME(6) NULL", ""},
	} {
		spec := claimSpec(t)
		spec.Table = "tz_" + string(rune('a'+i))
		spec.ClaimedAt = "claimed_at"
		def := store.ClaimTableDef(spec)
		for j, col := range def.Columns {
			if col.Name == "claimed_at" {
				def.Columns = append(def.Columns[:j:j], def.Columns[j+1:]...)
				break
			}
		}
		ddl, err := store.CreateTableDDL(d, def)
		require.NoError(t, err)
		require.NoError(t, store.ExecDDL(ctx, d, ddl))
		_, err = db.ExecContext(ctx, "ALTER TABLE "+spec.Table+" ADD COLUMN claimed_at "+c.typ)
		require.NoError(t, err)
		cs, err := store.OpenClaims(d, spec)
		require.NoError(t, err)
		err = cs.VerifySchema(ctx)
		if c.want == "" {
			require.NoError(t, err, c.typ)
			continue
		}
		require.ErrorIs(t, err, dialect.ErrInvalidConfig, c.typ)
		require.ErrorContains(t, err, c.want)
		require.ErrorContains(t, err, "ClaimedAt: column "+spec.Table+".claimed_at has type TIMESTAMP")
	}
}
