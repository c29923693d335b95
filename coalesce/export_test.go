package coalesce

// SetMarkRead makes c call fn in its dirty mark between the first read of
// the key's row and the write that follows it (nil to stop).
func SetMarkRead(c *Coalescer, fn func(key string)) { c.markRead = fn }
