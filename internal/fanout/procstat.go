package fanout

import (
	"runtime"
	"runtime/debug"

	"github.com/conclave-ai/conclave/internal/benchkit"
)

// Stats is what the server under test reports about itself
// (GET /bench/stats).
type Stats struct {
	// CPUSeconds is the process's user + system CPU time.
	CPUSeconds float64 `json:"cpu_seconds"`
	// RSSBytes is the resident set size (VmRSS).
	RSSBytes uint64 `json:"rss_bytes"`
	// HeapInuse and StackInuse are from runtime.MemStats.
	HeapInuse  uint64 `json:"heap_inuse"`
	StackInuse uint64 `json:"stack_inuse"`
	Goroutines int    `json:"goroutines"`
	// Published counts events published since start.
	Published int64 `json:"published"`
	// PublishSeconds is how long the publisher has run.
	PublishSeconds float64 `json:"publish_seconds"`
	// Dropped counts events the naive server could not queue for a client.
	Dropped int64 `json:"dropped"`
	// Writes counts writes to streams (Conclave batches events into one
	// write; the naive server writes each event on its own).
	Writes int64 `json:"writes"`
	// CatchupEvents counts events streams read from the journal because
	// their live queue overflowed (Conclave's
	// conclave_stream_catchup_events_total; 0 for the naive server).
	CatchupEvents int64 `json:"catchup_events"`
	// Run is the council run's progress (council workload, once started).
	Run *RunStats `json:"run,omitempty"`
	// Clients is the number of connected stream clients.
	Clients int `json:"clients"`
	// Publishing reports whether the publisher runs.
	Publishing bool `json:"publishing"`
}

// targetCounts are a target's counters (Stats has their meaning).
type targetCounts struct {
	clients                  int
	writes, dropped, catchup int64
}

// readProcStats fills the process fields of st. With gc, it first collects
// garbage and returns freed memory to the OS, so that memory figures count
// live data only.
func readProcStats(st *Stats, gc bool) {
	if gc {
		debug.FreeOSMemory()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st.HeapInuse, st.StackInuse = ms.HeapInuse, ms.StackInuse
	st.Goroutines = runtime.NumGoroutine()
	st.CPUSeconds = benchkit.SelfCPUSeconds()
	st.RSSBytes = benchkit.SelfRSS()
}
