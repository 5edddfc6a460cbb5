//go:build !linux

package fanout

// Process figures come from Linux interfaces; elsewhere they read as 0 and
// the report shows CPU and RSS as unavailable.

func cpuSeconds() float64 { return 0 }

func rssBytes() uint64 { return 0 }

// RaiseFileLimit is a no-op outside Linux; it reports n.
func RaiseFileLimit(n uint64) (uint64, error) { return n, nil }

func machineBusySeconds() float64 { return 0 }
