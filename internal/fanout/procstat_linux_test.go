package fanout

import "testing"

func TestParseVmRSS(t *testing.T) {
	t.Parallel()
	status := "Name:\tconclave\nVmPeak:\t  999 kB\nVmRSS:\t   12345 kB\nThreads:\t5\n"
	if got := parseVmRSS([]byte(status)); got != 12345<<10 {
		t.Errorf("got %d", got)
	}
	if got := parseVmRSS([]byte("VmRSS: 12 MB\n")); got != 0 {
		t.Errorf("unknown unit: got %d", got)
	}
	if got := parseVmRSS([]byte("Name: x\n")); got != 0 {
		t.Errorf("missing: got %d", got)
	}
}

func TestReadProcStats(t *testing.T) {
	t.Parallel()
	var st Stats
	readProcStats(&st, false)
	if st.RSSBytes == 0 || st.HeapInuse == 0 || st.Goroutines == 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestParseProcStatBusy(t *testing.T) {
	t.Parallel()
	stat := "cpu  100 20 30 5000 7 1 2 3 0 0\ncpu0 50 10 15 2500 3 0 1 1 0 0\n"
	if got := parseProcStatBusy([]byte(stat), 100); got != 1.56 {
		t.Errorf("busy = %v, want 1.56", got)
	}
	if got := parseProcStatBusy([]byte("intr 1 2 3\n"), 100); got != 0 {
		t.Errorf("no cpu line: %v", got)
	}
}
