package benchkit

import (
	"testing"
	"time"
)

func TestHistogram_Empty(t *testing.T) {
	t.Parallel()
	var h Histogram
	if h.Count() != 0 || h.Quantile(0.99) != 0 || h.Max() != 0 || h.Mean() != 0 {
		t.Errorf("empty histogram: count %d p99 %v max %v mean %v", h.Count(), h.Quantile(0.99), h.Max(), h.Mean())
	}
}

func TestHistogram_BucketsAreContiguous(t *testing.T) {
	t.Parallel()
	prev := -1
	for v := uint64(0); v < 1<<20; v++ {
		b := bucketOf(v)
		if b != prev && b != prev+1 {
			t.Fatalf("bucketOf(%d) = %d after %d", v, b, prev)
		}
		if b != prev && prev >= 0 && bucketHigh(prev) != v-1 {
			t.Fatalf("bucketHigh(%d) = %d, want %d", prev, bucketHigh(prev), v-1)
		}
		prev = b
	}
	if last := bucketOf(1<<maxBits - 1); last != histBuckets-1 || bucketHigh(last) != 1<<maxBits-1 {
		t.Errorf("last bucket %d (high %d), want %d", last, bucketHigh(last), histBuckets-1)
	}
}

func TestHistogram_QuantilesOfUniform(t *testing.T) {
	t.Parallel()
	var h Histogram
	for i := 1; i <= 100_000; i++ {
		h.Record(time.Duration(i) * time.Microsecond) // 1 µs .. 100 ms
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{
		{0.5, 50 * time.Millisecond},
		{0.99, 99 * time.Millisecond},
		{0.999, 99900 * time.Microsecond},
		{1, 100 * time.Millisecond},
	} {
		got := h.Quantile(tc.q)
		if got < tc.want || float64(got-tc.want) > float64(tc.want)/64 {
			t.Errorf("Quantile(%v) = %v, want %v within +1/64", tc.q, got, tc.want)
		}
	}
	if h.Max() != 100*time.Millisecond {
		t.Errorf("Max = %v", h.Max())
	}
	if m := h.Mean(); m < 49*time.Millisecond || m > 51*time.Millisecond {
		t.Errorf("Mean = %v", m)
	}
}

func TestHistogram_SmallValuesAreExact(t *testing.T) {
	t.Parallel()
	var h Histogram
	for _, us := range []int{3, 3, 5, 90, 127} {
		h.Record(time.Duration(us) * time.Microsecond)
	}
	h.Record(-time.Second)          // counted as 0
	h.Record(500 * time.Nanosecond) // below the resolution: 0
	if got := h.Quantile(0.5); got != 3*time.Microsecond {
		t.Errorf("p50 = %v, want 3µs", got)
	}
	if got := h.Quantile(1); got != 127*time.Microsecond {
		t.Errorf("p100 = %v, want 127µs", got)
	}
	if got := h.Quantile(0); got != 0 {
		t.Errorf("p0 = %v, want 0", got)
	}
}

func TestHistogram_ClampsHugeValues(t *testing.T) {
	t.Parallel()
	var h Histogram
	h.Record(1000 * time.Hour)
	if h.Max() != HistogramMax || h.Quantile(0.5) != HistogramMax {
		t.Errorf("max %v p50 %v, want %v", h.Max(), h.Quantile(0.5), HistogramMax)
	}
}

func TestHistogram_Merge(t *testing.T) {
	t.Parallel()
	var a, b Histogram
	for range 99 {
		a.Record(time.Millisecond)
	}
	b.Record(time.Second)
	a.Merge(&b)
	if a.Count() != 100 || a.Max() != time.Second {
		t.Fatalf("count %d max %v", a.Count(), a.Max())
	}
	if p := a.Quantile(0.99); p < 990*time.Microsecond || p > 1010*time.Microsecond {
		t.Errorf("p99 = %v, want ~1ms", p)
	}
	if p := a.Quantile(0.999); p != time.Second {
		t.Errorf("p99.9 = %v, want 1s", p)
	}
}
