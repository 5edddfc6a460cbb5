package messages

import "testing"

func TestValidTraceparent(t *testing.T) {
	t.Parallel()
	const tid, sid = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{"00-" + tid + "-" + sid + "-01", true},
		{"00-" + tid + "-" + sid + "-00", true},                       // not sampled: still continued
		{"01-" + tid + "-" + sid + "-01-later-fields", true},          // a later version, read by its 00 prefix
		{"00-" + tid + "-" + sid + "-01-x", false},                    // version 00 has exactly four fields
		{"ff-" + tid + "-" + sid + "-01", false},                      // version ff is invalid
		{"00-00000000000000000000000000000000-" + sid + "-01", false}, // all-zero trace id
		{"00-" + tid + "-0000000000000000-01", false},                 // all-zero parent id
		{"00-0AF7651916CD43DD8448EB211C80319C-" + sid + "-01", false}, // uppercase
		{"00-" + tid + "-" + sid, false},
		{"00_" + tid + "-" + sid + "-01", false},
		{"", false},
	} {
		if got := ValidTraceparent(tc.s); got != tc.want {
			t.Errorf("ValidTraceparent(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
}

func TestStartRunOptions_Traceparent(t *testing.T) {
	t.Parallel()
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	o, err := StartRun{Question: "q", TraceParent: tp}.Options(RunDefaults{Concurrency: 1})
	if err != nil || o.TraceParent != tp || o.TraceID != "0af7651916cd43dd8448eb211c80319c" {
		t.Fatalf("Options: %+v, %v: want the traceparent and its trace id", o, err)
	}
	o, err = StartRun{Question: "q", TraceParent: "garbage"}.Options(RunDefaults{Concurrency: 1})
	if err != nil || o.TraceParent != "" || o.TraceID != "" {
		t.Fatalf("an invalid traceparent: %+v, %v: want it ignored", o, err)
	}
	back := (&RunStartedPayload{Question: "q", TraceID: "0af7651916cd43dd8448eb211c80319c", TraceParent: tp}).Options(RunDefaults{Concurrency: 1})
	if back.TraceID != "0af7651916cd43dd8448eb211c80319c" || back.TraceParent != tp {
		t.Fatalf("run_started's options %+v: the trace is lost across a restart", back)
	}
}
