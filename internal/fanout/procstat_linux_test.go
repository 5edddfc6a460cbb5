package fanout

import "testing"

func TestReadProcStats(t *testing.T) {
	t.Parallel()
	var st Stats
	readProcStats(&st, false)
	if st.RSSBytes == 0 || st.HeapInuse == 0 || st.Goroutines == 0 {
		t.Errorf("stats %+v", st)
	}
}
