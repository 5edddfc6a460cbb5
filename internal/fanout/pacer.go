package fanout

import (
	"math"
	"time"
)

// Pacer keeps a publisher at a fixed average rate. The publisher asks it,
// on every tick of a fast ticker, how many events are due: the number that
// brings the total to rate × elapsed time. Ticks that come late or are
// skipped are made up on the next one, so the average holds however
// coarse or irregular the ticker is, and events go out in small bursts
// (rate/1000 per millisecond tick) instead of one timer per event.
type Pacer struct {
	rate  float64 // events per second
	start time.Time
	sent  int64
}

// NewPacer paces rate events per second (> 0) from start.
func NewPacer(rate float64, start time.Time) *Pacer {
	return &Pacer{rate: rate, start: start}
}

// Due returns how many events to send at now, and counts them as sent.
func (p *Pacer) Due(now time.Time) int {
	elapsed := now.Sub(p.start)
	if elapsed <= 0 {
		return 0
	}
	target := int64(math.Floor(elapsed.Seconds() * p.rate))
	n := target - p.sent
	if n <= 0 {
		return 0
	}
	p.sent = target
	return int(n)
}

// Sent is the number of events Due has handed out.
func (p *Pacer) Sent() int64 { return p.sent }
