package messages

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseSupervision(t *testing.T) {
	t.Parallel()
	got, err := ParseSupervision("team=all-for-one,worker=restart:3/10s,subagent=one-for-one:5/1m@200ms,director=stop,debater=default:2")
	if err != nil {
		t.Fatal(err)
	}
	want := &Supervision{
		Team:     &SupervisionPolicy{Strategy: SupervisionAllForOne},
		Worker:   &SupervisionPolicy{Strategy: SupervisionOneForOne, RestartLimit: 3, WindowMS: 10_000},
		Subagent: &SupervisionPolicy{Strategy: SupervisionOneForOne, RestartLimit: 5, WindowMS: 60_000, BackoffMS: 200},
		Director: &SupervisionPolicy{Strategy: SupervisionStop},
		Debater:  &SupervisionPolicy{RestartLimit: 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parsed %s, want %s", got, want)
	}
	// String is the parseable form again.
	if again, err := ParseSupervision(got.String()); err != nil || !reflect.DeepEqual(again, got) {
		t.Fatalf("String %q parses to %v, %v", got.String(), again, err)
	}
	for _, bad := range []string{"", "team", "boss=stop", "team=all-for-one,team=stop", "team=sometimes", "worker=restart:0",
		"worker=restart:x/1s", "worker=restart:3/1parsec", "worker=restart@-1s", "worker=restart:3/2h", "debater=one-for-one"} {
		if s, err := ParseSupervision(bad); err == nil {
			t.Errorf("ParseSupervision(%q) = %s, want an error", bad, s)
		}
	}
}

func TestMerge(t *testing.T) {
	t.Parallel()
	server := &Supervision{Worker: &SupervisionPolicy{RestartLimit: 1, BackoffMS: 5}, Director: &SupervisionPolicy{Strategy: SupervisionStop}}
	run := &Supervision{Worker: &SupervisionPolicy{Strategy: SupervisionAllForOne, BackoffMS: 50}, Team: &SupervisionPolicy{Strategy: SupervisionAllForOne}}
	got := Merge(server, run)
	if s := got.String(); s != "director=stop,worker=all-for-one:1@50ms,team=all-for-one" {
		t.Errorf("merged %q", s)
	}
	if server.Worker.Strategy != "" || run.Worker.RestartLimit != 0 {
		t.Error("Merge changed its inputs")
	}
	if Merge(nil, &Supervision{}) != nil {
		t.Error("merging nothing is not nil")
	}
}

func TestStartRunOptions_Supervision(t *testing.T) {
	t.Parallel()
	d := RunDefaults{Concurrency: 5, ApprovalTimeout: time.Minute}
	sup := &Supervision{Team: &SupervisionPolicy{Strategy: SupervisionAllForOne}}
	o, err := StartRun{Question: "q", Supervision: sup}.Options(d)
	if err != nil || o.Supervision != sup {
		t.Fatalf("options %+v, %v", o.Supervision, err)
	}
	if o := (&RunStartedPayload{Question: "q", Supervision: sup}).Options(d); o.Supervision != sup {
		t.Fatalf("run_started options %+v", o.Supervision)
	}
	_, err = StartRun{Question: "q", Supervision: &Supervision{Worker: &SupervisionPolicy{RestartLimit: 1000}}}.Options(d)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "supervision.worker.restart_limit" {
		t.Fatalf("err %v", err)
	}
	_, err = StartRun{Question: "q", Supervision: &Supervision{Team: &SupervisionPolicy{Strategy: "sometimes"}}}.Options(d)
	if err == nil || !strings.Contains(err.Error(), "supervision.team.strategy") {
		t.Fatalf("err %v", err)
	}
}

func TestScenarioValidate_PanicMembers(t *testing.T) {
	t.Parallel()
	ok := Scenario{PanicMembers: []string{"n001/m2", "n003:a2", "n001/m1/m2"}}.WithDefaults()
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"n001", "", "n001/", "n 1/m1", ":a1"} {
		s := Scenario{PanicMembers: []string{bad}}.WithDefaults()
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "panic_members[0]") {
			t.Errorf("panic_members %q: %v", bad, err)
		}
	}
}
