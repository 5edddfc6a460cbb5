package benchkit

import (
	"math"
	"math/bits"
	"time"
)

// Histogram counts durations in log-linear buckets, like HdrHistogram with
// two significant decimal digits: values are kept in microseconds, exactly
// below 128 µs and with a relative error under 1/64 (1.6%) above. Values
// at or beyond HistogramMax are counted at HistogramMax.
//
// A Histogram is not safe for concurrent use: each client records into its
// own, and Merge combines them once the clients have stopped. The zero
// value is ready to use.
type Histogram struct {
	counts [histBuckets]uint64
	n      uint64
	sum    uint64 // microseconds
	max    uint64 // microseconds
}

const (
	subBits = 6
	subHalf = 1 << subBits // buckets per power of two above the exact range
	// maxBits bounds recorded values to 2^32 µs (71 minutes).
	maxBits     = 32
	histBuckets = (maxBits-subBits)*subHalf + subHalf
	// HistogramMax is the largest duration a Histogram tells apart.
	HistogramMax = time.Duration(1<<maxBits-1) * time.Microsecond
)

// bucketOf maps v (microseconds, < 2^maxBits) to its bucket.
func bucketOf(v uint64) int {
	if v < 2*subHalf {
		return int(v)
	}
	shift := bits.Len64(v) - (subBits + 1)
	return (shift+1)*subHalf + int(v>>shift) - subHalf
}

// bucketHigh is the largest value of bucket i.
func bucketHigh(i int) uint64 {
	if i < 2*subHalf {
		return uint64(i)
	}
	shift := i/subHalf - 1
	low := uint64(i%subHalf+subHalf) << shift
	return low + (1 << shift) - 1
}

// Record counts one duration; negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := uint64(0)
	if d > 0 {
		v = uint64(d / time.Microsecond)
	}
	if v >= 1<<maxBits {
		v = 1<<maxBits - 1
	}
	h.counts[bucketOf(v)]++
	h.n++
	h.sum += v
	h.max = max(h.max, v)
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 { return h.n }

// Max is the largest recorded value.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) * time.Microsecond }

// Mean is the average of the recorded values (0 when empty).
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum/h.n) * time.Microsecond
}

// Quantile returns the value below or at which a fraction q of the
// recorded values lie: the highest value of the bucket holding the
// ceil(q·n)-th smallest value, never more than Max. It is 0 when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(min(bucketHigh(i), h.max)) * time.Microsecond
		}
	}
	return h.Max()
}

// Merge adds o's values to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}
