package fanout

import (
	"strings"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/internal/benchkit"
)

func fixedClock() time.Time { return time.Unix(5, 0) }

// BenchmarkClientSSE measures a client's work per event, apart from the
// read syscalls: splitting frames and finding seq and stamp.
func BenchmarkClientSSE(b *testing.B) {
	frame := "id: 123456\nevent: text_delta\ndata: {\"id\":\"5f0c3c47-4a53-4f4b-9a4e-3f8f7d2c1b0a\",\"seq\":123456," +
		"\"type\":\"text_delta\",\"timestamp\":\"2026-11-21T08:34:41.123456789Z\",\"session_id\":\"bench\",\"run_id\":\"bench\"," +
		"\"agent_id\":\"bench\",\"lane\":{\"stream_id\":\"bench\",\"depth\":0},\"payload\":{\"delta\":\"" +
		string(AppendStamp(nil, 1_763_714_081_123_456_789, 100)) + "\"}}\n\n"
	chunk := strings.Repeat(frame, 16)
	r := strings.NewReader(chunk)
	s := benchkit.NewSSEScanner(r, 32<<10, 32<<10, fixedClock)
	var c streamClient
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		f, err := s.Next()
		if err != nil {
			r.Reset(chunk)
			s.Reset(r)
			continue
		}
		seq, _ := parseUint(f.ID)
		stamp, ok := FindStamp(f.Data)
		c.last = seq - 1
		c.record(seq, stamp, ok, f.ReadAt)
	}
}
