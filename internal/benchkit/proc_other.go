//go:build !linux

package benchkit

// Process figures come from Linux interfaces; elsewhere they read as 0 and
// the reports show CPU and RSS as unavailable.

func SelfCPUSeconds() float64 { return 0 }

func ProcessCPUSeconds(int) float64 { return 0 }

func SelfRSS() uint64 { return 0 }

func ProcessRSS(int) uint64 { return 0 }

// RaiseFileLimit is a no-op outside Linux; it reports n.
func RaiseFileLimit(n uint64) (uint64, error) { return n, nil }

func MachineBusySeconds() float64 { return 0 }
