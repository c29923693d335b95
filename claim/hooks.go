package claim

import "time"

// Hooks are optional metric callbacks. Each may be nil. They are called
// synchronously on the goroutine doing the work, so they must be cheap and
// safe for concurrent use (increment a counter, observe a histogram).
type Hooks struct {
	// OnClaim is called after every successful claim, with the number of
	// rows claimed (possibly 0) and the claim's latency, including any wait
	// for a claim slot (Config.ClaimConcurrency).
	OnClaim func(n int, latency time.Duration)
	// OnAck is called with the number of rows an ack set to done.
	OnAck func(n int)
	// OnRequeue is called with the number of rows a version-conditioned ack
	// sent back to pending because their version moved during processing.
	OnRequeue func(n int)
	// OnLost is called with the number of rows an ack or fail found no
	// longer held by the batch's token.
	OnLost func(n int)
	// OnFail is called with the number of rows failed (returned to pending
	// for a retry or parked as failed).
	OnFail func(n int)
	// OnEmpty is called when a claim found nothing pending.
	OnEmpty func()
}

func (h *Hooks) claim(n int, d time.Duration) {
	if h.OnClaim != nil {
		h.OnClaim(n, d)
	}
	if n == 0 && h.OnEmpty != nil {
		h.OnEmpty()
	}
}

func (h *Hooks) ack(n int) {
	if n > 0 && h.OnAck != nil {
		h.OnAck(n)
	}
}

func (h *Hooks) requeue(n int) {
	if n > 0 && h.OnRequeue != nil {
		h.OnRequeue(n)
	}
}

func (h *Hooks) lost(n int) {
	if n > 0 && h.OnLost != nil {
		h.OnLost(n)
	}
}

func (h *Hooks) fail(n int) {
	if n > 0 && h.OnFail != nil {
		h.OnFail(n)
	}
}
