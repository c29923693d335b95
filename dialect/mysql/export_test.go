package mysql

import (
	"time"

	"github.com/claimlock/claimlock/internal/store"
)

// DeferRescan makes the next claims of store start above its key cursor
// for another cursorRescan, as if one had just scanned from the start: for
// tests that need the cursor path whatever time a loaded machine took
// since the last scan.
func DeferRescan(cs store.ClaimStore) {
	c := cs.(*store.Claims).Ext.(*claimer)
	c.cursor.scanned.Store(int64(time.Since(epoch)))
}
