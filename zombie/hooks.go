package zombie

// Hooks are optional metric callbacks. Each may be nil. They are called
// synchronously on the goroutine doing the work, so they must be cheap and
// safe for concurrent use.
type Hooks struct {
	// OnSweepStart is called when a sweep begins.
	OnSweepStart func()
	// OnSweep is called when a sweep ends, with what it did (possibly
	// nothing), also when it failed or its context ended: the rows it counts
	// were committed.
	OnSweep func(Result)
	// OnError is called, after OnSweep, with the error of every sweep that
	// failed, and with the error of every failed lease acquisition in Run.
	// A sweep stopped because its context ended is not an error here.
	OnError func(error)
	// OnLeader is called by [Reaper.Run] with a [Config.Locker] when it
	// takes the lease (true) and when it gives it up or loses it (false).
	OnLeader func(leading bool)
}

func (h *Hooks) sweepStart() {
	if h.OnSweepStart != nil {
		h.OnSweepStart()
	}
}

func (h *Hooks) sweep(r Result) {
	if h.OnSweep != nil {
		h.OnSweep(r)
	}
}

func (h *Hooks) err(err error) {
	if h.OnError != nil {
		h.OnError(err)
	}
}

func (h *Hooks) leader(leading bool) {
	if h.OnLeader != nil {
		h.OnLeader(leading)
	}
}
