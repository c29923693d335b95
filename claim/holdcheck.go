package claim

// The checks package hold runs (hold.Check): every context a batch hands to
// work carries one, installed with holdctx.With.

// holdErr is the batch's check: [Batch.Err], which compares the local
// deadline with the clock itself and ends the batch once it passed.
func (b *Batch[T]) holdErr() error { return b.Err() }

// rowHoldErr returns the check of row i: the loss that closed the row,
// else the batch's check.
func (b *Batch[T]) rowHoldErr(i int) func() error {
	return func() error {
		if cause := b.lostCause(i); cause != nil {
			return cause
		}
		return b.holdErr()
	}
}
