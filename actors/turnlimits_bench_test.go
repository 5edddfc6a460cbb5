package actors_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/scripted"
)

// BenchmarkHugeDeltas runs a wave of 8 workers whose model answers each
// turn with one 10 MB text chunk, every event journaled (in memory) and
// delivered to one subscriber that keeps nothing, and reports the peak
// heap in use during a run (sampled every 2 ms) and the bytes allocated
// per run. "bounded" is the engine's defaults (64 KiB deltas, 4 MiB a
// turn); "unbounded" turns both bounds off, as the engine was before them.
//
//	go test ./actors -run '^$' -bench BenchmarkHugeDeltas -benchtime 3x
func BenchmarkHugeDeltas(b *testing.B) {
	const delta = 10 << 20
	for _, bc := range []struct {
		name string
		cfg  actors.Config
	}{
		{"bounded", actors.Config{}},
		{"unbounded", actors.Config{MaxDeltaBytes: 1 << 30, MaxTurnOutputBytes: -1}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			sc := messages.Scenario{Nodes: 8, Waves: 1, Tokens: 4}
			sm, err := scripted.New(sc)
			if err != nil {
				b.Fatal(err)
			}
			text := strings.Repeat("x", delta)
			cfg := bc.cfg
			cfg.Models = func(messages.Scenario) (model.Model, error) {
				return hugeModel{Model: sm, text: text, noCall: true}, nil
			}
			var peak, alloc uint64
			for b.Loop() {
				p, a := hugeRun(b, cfg, messages.StartRun{Question: "q", Scenario: &sc})
				peak, alloc = max(peak, p), alloc+a
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(alloc)/float64(b.N)/(1<<20), "alloc-MiB/run")
		})
	}
}

// hugeRun runs cmd on a new engine and returns the peak heap in use above
// the heap before the run, and the bytes allocated.
func hugeRun(b *testing.B, cfg actors.Config, cmd messages.StartRun) (peak, alloc uint64) {
	ctx := context.Background()
	e, err := actors.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, allocBefore := ms.HeapInuse, ms.TotalAlloc
	stop, sampled := make(chan struct{}), make(chan uint64)
	go func() { // owned by hugeRun: ends when stop closes
		var top uint64
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				sampled <- top
				return
			case <-t.C:
				runtime.ReadMemStats(&m)
				top = max(top, m.HeapInuse)
			}
		}
	}()
	ref, err := e.StartRun(ctx, cmd)
	if err != nil {
		b.Fatal(err)
	}
	sub, err := e.Subscribe(ctx, messages.Subscribe{Tenant: ref.Tenant, SessionID: ref.SessionID})
	if err != nil {
		b.Fatal(err)
	}
	var buf []*messages.Encoded
	for done := false; !done; {
		buf, err = sub.Next(ctx, buf[:0], 64)
		if err != nil {
			b.Fatal(err)
		}
		for i, enc := range buf {
			if enc.RunID == ref.RunID && enc.Type.Terminal() {
				if enc.Type != messages.RunFinished {
					b.Fatalf("run ended with %s", enc.Type)
				}
				done = true
			}
			buf[i] = nil
		}
	}
	sub.Close()
	close(stop)
	top := <-sampled
	runtime.ReadMemStats(&ms)
	alloc = ms.TotalAlloc - allocBefore
	if err := e.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
	if top > base {
		peak = top - base
	}
	return peak, alloc
}
