package journal

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/conclave-ai/conclave/messages"
)

// BenchmarkDurable_Open opens a journal of 1M events (300 bytes, 16
// sessions). verify=all is the first Open after those events were
// appended: it verifies every one (the high-water mark log's verified
// marks are reset before each iteration). verify=none is every later Open.
//
//	go test ./journal/ -run '^$' -bench Durable_Open -benchtime 5x
func BenchmarkDurable_Open(b *testing.B) {
	const total, sessions = 1_000_000, 16
	dir := b.TempDir()
	d, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	json := []byte(`{"seq":1,"pad":"` + strings.Repeat("x", 280) + `"}`)
	for q := uint64(1); q <= total/sessions; q += 512 {
		for s := range sessions {
			var evs []*messages.Encoded
			for seq := q; seq < q+512 && seq <= total/sessions; seq++ {
				evs = append(evs, messages.NewEncoded(seq, messages.TextDelta, "run-0001", json))
			}
			if err := d.Append(ctx, messages.SessionID(fmt.Sprintf("t/session-%02d", s)), evs); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := d.Close(); err != nil {
		b.Fatal(err)
	}
	resetVerified := func() {
		r, err := readHWM(vfs.Default, dir, hwmFile)
		if err != nil {
			b.Fatal(err)
		}
		var entries []hwmEntry
		for _, e := range r.entries {
			e.verified = 0
			entries = append(entries, *e)
		}
		h, err := writeHWM(vfs.Default, dir, hwmFile, entries)
		if err != nil {
			b.Fatal(err)
		}
		_ = h.Close()
	}
	for _, verify := range []string{"all", "none"} {
		b.Run("verify="+verify, func(b *testing.B) {
			for range b.N {
				if verify == "all" {
					b.StopTimer()
					resetVerified()
					b.StartTimer()
				}
				d, err := Open(dir, Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := d.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/open")
		})
	}
}
