package a2a

// InFlight reports how many calls are being served, for tests.
func (h *Handler) InFlight() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inflight
}
