package coalesce_test

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/conclave-ai/conclave/actors/coalesce"
)

// sink records what a Gate passes on, with the (virtual) time it did.
type sink struct {
	mu    sync.Mutex
	start time.Time
	vals  []int
	at    []time.Duration
}

func (s *sink) send(v int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vals = append(s.vals, v)
	s.at = append(s.at, time.Since(s.start))
}

func (s *sink) got() ([]int, []time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.vals), slices.Clone(s.at)
}

func TestGate_Offer(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := &sink{start: time.Now()}
		g := coalesce.New(coalesce.Config{Interval: 100 * time.Millisecond}, s.send)
		defer g.Close()
		g.Offer(1) // the first goes out at once
		time.Sleep(10 * time.Millisecond)
		g.Offer(2) // held back, then replaced
		g.Offer(3)
		time.Sleep(150 * time.Millisecond) // 3 went out at 100ms
		g.Offer(4)                         // 160ms: held until 200ms
		synctest.Wait()
		vals, at := s.got()
		if want := []int{1, 3}; !slices.Equal(vals, want) {
			t.Fatalf("passed on %v by 160ms, want %v", vals, want)
		}
		time.Sleep(time.Second)
		vals, at = s.got()
		if want := []int{1, 3, 4}; !slices.Equal(vals, want) {
			t.Fatalf("passed on %v, want %v", vals, want)
		}
		if want := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond}; !slices.Equal(at, want) {
			t.Fatalf("passed on at %v, want %v", at, want)
		}
		g.Offer(5) // long after the last: at once
		if vals, _ := s.got(); vals[len(vals)-1] != 5 {
			t.Fatalf("a value after a quiet interval waited: %v", vals)
		}
	})
}

// A chatty reporter: one value a millisecond for a second costs at most
// one value per interval (plus the first), and the last value goes out.
func TestGate_Chatty(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := &sink{start: time.Now()}
		g := coalesce.New(coalesce.Config{}, s.send) // DefaultInterval
		defer g.Close()
		for i := 1; i <= 1000; i++ {
			g.Offer(i)
			time.Sleep(time.Millisecond)
		}
		time.Sleep(coalesce.DefaultInterval)
		vals, at := s.got()
		if n := len(vals); n > 1+int(time.Second/coalesce.DefaultInterval) {
			t.Fatalf("%d values passed on: %v", n, vals)
		}
		if vals[len(vals)-1] != 1000 {
			t.Fatalf("the last value was lost: %v", vals)
		}
		for i := 1; i < len(at); i++ {
			if at[i]-at[i-1] < coalesce.DefaultInterval {
				t.Fatalf("values %v passed on at %v: closer than the interval", vals, at)
			}
		}
	})
}

func TestGate_Close(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := &sink{start: time.Now()}
		g := coalesce.New(coalesce.Config{Interval: time.Second}, s.send)
		g.Offer(1)
		g.Offer(2) // held back
		g.Close()
		g.Close() // idempotent
		g.Offer(3)
		time.Sleep(2 * time.Second)
		if vals, _ := s.got(); !slices.Equal(vals, []int{1}) {
			t.Fatalf("passed on %v after Close, want [1]", vals)
		}
	})
}
