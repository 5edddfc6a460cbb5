package fanout

import (
	"slices"
	"testing"
	"time"
)

func TestPacer_MillisecondTicks(t *testing.T) {
	t.Parallel()
	start := time.Unix(1000, 0)
	p := NewPacer(1500, start)
	var burst []int
	for ms := 1; ms <= 4; ms++ {
		burst = append(burst, p.Due(start.Add(time.Duration(ms)*time.Millisecond)))
	}
	if want := []int{1, 2, 1, 2}; !slices.Equal(burst, want) {
		t.Errorf("bursts %v, want %v", burst, want)
	}
	for ms := 5; ms <= 1000; ms++ {
		p.Due(start.Add(time.Duration(ms) * time.Millisecond))
	}
	if p.Sent() != 1500 {
		t.Errorf("sent %d in one second, want 1500", p.Sent())
	}
}

func TestPacer_MakesUpLateTicks(t *testing.T) {
	t.Parallel()
	start := time.Unix(1000, 0)
	p := NewPacer(2000, start)
	if n := p.Due(start.Add(time.Millisecond)); n != 2 {
		t.Fatalf("first tick: %d", n)
	}
	if n := p.Due(start.Add(51 * time.Millisecond)); n != 100 { // 50 ms stall
		t.Errorf("after a stall: %d, want 100", n)
	}
	if n := p.Due(start.Add(51 * time.Millisecond)); n != 0 {
		t.Errorf("same instant again: %d, want 0", n)
	}
}

func TestPacer_SlowRates(t *testing.T) {
	t.Parallel()
	start := time.Unix(1000, 0)
	p := NewPacer(3, start)
	total := 0
	for ms := 1; ms <= 2000; ms++ {
		total += p.Due(start.Add(time.Duration(ms) * time.Millisecond))
	}
	if total != 6 {
		t.Errorf("%d events in 2 s at 3/s", total)
	}
}

func TestPacer_BeforeStart(t *testing.T) {
	t.Parallel()
	start := time.Unix(1000, 0)
	p := NewPacer(1e6, start)
	if n := p.Due(start.Add(-time.Second)); n != 0 {
		t.Errorf("due before start: %d", n)
	}
	if n := p.Due(start); n != 0 {
		t.Errorf("due at start: %d", n)
	}
}
