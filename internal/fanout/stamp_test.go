package fanout

import (
	"bytes"
	"strings"
	"testing"
)

func TestAppendStamp_RoundTrip(t *testing.T) {
	t.Parallel()
	for _, ts := range []int64{0, 1, 1_760_000_000_123_456_789, 1<<63 - 1} {
		p := AppendStamp(nil, ts, 100)
		if len(p) != 100 {
			t.Fatalf("len = %d, want 100", len(p))
		}
		if !bytes.HasPrefix(p, []byte("t=")) || p[StampLen-1] != ';' || strings.Trim(string(p[StampLen:]), "x") != "" {
			t.Fatalf("payload %q has the wrong shape", p)
		}
		got, ok := FindStamp(append(append([]byte(`{"delta":"`), p...), `"}`...))
		if !ok || got != ts {
			t.Errorf("FindStamp = %d, %v; want %d", got, ok, ts)
		}
	}
}

func TestAppendStamp_MinimumSize(t *testing.T) {
	t.Parallel()
	if p := AppendStamp([]byte("ab"), 7, StampLen); string(p) != "abt=0000000000000000007;" {
		t.Errorf("got %q", p)
	}
	if err := ValidPayloadSize(StampLen - 1); err == nil {
		t.Error("a payload shorter than the stamp was accepted")
	}
	if err := ValidPayloadSize(100); err != nil {
		t.Error(err)
	}
}

func TestFindStamp_SkipsLookalikes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{`{"a":"t=12;","delta":"t=0000000000000000042;xx"}`, 42, true},
		{`{"delta":"t=000000000000000004x;"}`, 0, false},
		{`{"delta":"t=0000000000000000042"}`, 0, false},
		{`{"delta":"t=9999999999999999999;"}`, 0, false}, // overflows int64
		{`"t=`, 0, false},
		{``, 0, false},
	} {
		got, ok := FindStamp([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("FindStamp(%s) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestFindSeq(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{`{"id":"x","seq":12345,"type":"text_delta"}`, 12345, true},
		{`{"seq":0}`, 0, true},
		{`{"seq":}`, 0, false},
		{`{"seq":12345678901234567890}`, 0, false},
		{`{"id":"x"}`, 0, false},
	} {
		got, ok := FindSeq([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("FindSeq(%s) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
